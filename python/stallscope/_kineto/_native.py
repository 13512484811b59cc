"""The native reader of Kineto JSON: `_core.kineto_scan` walks the bytes once in C++ (no Python
object per event) and returns typed columns; this module turns them into the frame that
`_convert.normalise` would produce from the general reader's output, value for value.

The scanner accepts only the common shape (strings where strings are expected, integers or plain
decimal numbers elsewhere, no duplicated keys, valid JSON). For anything else it says why and
`scan` returns None: the caller then takes the general reader (_parse), which also produces the
error message for malformed input. Top-level metadata (everything but traceEvents, a few KiB)
goes through the general reader's own metadata code, so it is identical too.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from stallscope._kineto import _parse

# normalise()'s columns, in its order: (name, kind) with kind str / int / time / flag.
_STR = ("ph", "cat", "name")
_INT = ("pid", "tid", "id")
_INT_ARGS = ("a:correlation", "a:stream", "a:External id", "a:device", "a:bytes",
             "a:Group size", "a:In msg nelems", "a:Out msg nelems")  # fmt: skip
_STR_ARGS = ("a:cuda_sync_kind", "a:Collective name", "a:dtype", "a:Process Group Name",
             "a:Process Group Description", "a:Process Group Ranks")  # fmt: skip


def available() -> bool:
    try:
        from stallscope import _core
    except ImportError:
        return False
    return hasattr(_core, "kineto_scan")


def _strings(codes: np.ndarray[Any, Any], table: list[str]) -> pl.Series:
    idx = pl.Series(codes, dtype=pl.Int32)
    idx = pl.select(pl.when(idx >= 0).then(idx)).to_series()
    return pl.Series(table, dtype=pl.String).gather(idx)


def _ints(values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any]) -> pl.Series:
    v = pl.Series(values, dtype=pl.Int64)
    ok = pl.Series(valid).cast(pl.Boolean)
    return pl.select(pl.when(ok).then(v)).to_series()


def meta(raw: bytes) -> dict[str, Any] | None:
    """The general reader's metadata for a document whose traceEvents list was emptied; None
    when that reader would not take its Polars path (the caller then falls back wholesale)."""
    try:
        top = pl.read_json(io.BytesIO(raw), schema=_parse.FAST_SCHEMA)
    except Exception:  # the general reader would take its slow path: so does the caller
        return None
    if top.height != 1:
        return None
    out = _parse._meta_from_row(top.drop("traceEvents").row(0, named=True))
    if out.get("distributedInfo") is not None or out.get("deviceProperties") is not None:
        out.update(_parse._head_metadata(raw))
    return out


def scan(raw: bytes, path: Path) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    """(normalised events, metadata) or None when the general reader must take the file."""
    from stallscope import _core

    res = _core.kineto_scan(raw)
    if isinstance(res, str):
        return None
    begin, end = res["events_span"]
    m = meta(raw[:begin] + b'"traceEvents":[]' + raw[end:])
    if m is None:
        return None
    n = int(res["rows"])
    cols: dict[str, pl.Series] = {}
    for c in _STR:
        cols[c] = _strings(*res[c])
    cols["bp"] = pl.Series([None] * n, dtype=pl.String)  # never read after normalise
    for c in _INT:
        cols[c] = _ints(*res[c])
    cols["ts_ns"] = _ints(*res["ts_ns"])
    cols["dur_ns"] = _ints(*res["dur_ns"])
    cols["ts_is_float"] = pl.Series(res["ts_is_float"]).cast(pl.Boolean)
    cols["has_ts"] = pl.Series(res["has_ts"]).cast(pl.Boolean)
    cols["has_dur"] = pl.Series(res["has_dur"]).cast(pl.Boolean)
    for c in _INT_ARGS:
        cols[c] = _ints(*res[c])
    for c in _STR_ARGS:
        cols[c] = _strings(*res[c])
    del res
    return pl.DataFrame({k: v.alias(k) for k, v in cols.items()}), m
