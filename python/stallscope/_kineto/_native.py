"""The native reader of Kineto JSON: `_core.kineto_scan` walks the bytes once in C++ (no Python
object per event) and returns typed columns; this module turns them into the frame that
`_convert.normalise` would produce from the general reader's output, value for value.

The scanner accepts only the common shape (strings where strings are expected, integers or plain
decimal numbers elsewhere, no duplicated keys, valid JSON). For anything else it says why and
`scan` returns None: the caller then takes the general reader (_parse), which also produces the
error message for malformed input. Numbers follow whichever decoder the general reader uses
here: msgspec (typed) when installed, else Polars' string reader. Top-level metadata (everything but traceEvents, a few KiB)
goes through the general reader's own metadata code, so it is identical too.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from stallscope._kineto import _parse
from stallscope._kineto._convert import ns_from_float
from stallscope._kineto._fastjson import parse_fast
from stallscope.exceptions import TraceImportError

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


def typed() -> bool:
    """Whether the general reader decodes with msgspec (typed numbers: a ts column with any
    float is Float64, converted by `ns_from_float`) rather than Polars' string reader."""
    try:
        import msgspec  # noqa: F401
    except ImportError:
        return False
    return True


def _typed_meta(raw: bytes, path: Path) -> dict[str, Any] | None:
    try:
        res = parse_fast([raw], path)
    except TraceImportError:
        return None
    return None if res is None else res[1]


def _time(res: dict[str, Any], key: str, is_typed: bool) -> tuple[pl.Series, pl.Series]:
    """(ns, written as a float) of ts or dur, as the general reader's `_as_ns` gives them."""
    has = pl.Series(res[f"has_{key}"]).cast(pl.Boolean)
    if is_typed and res[f"{key}_any_float"]:  # a Float64 column: every value is a float
        f = pl.Series(res[f"{key}_f64"], dtype=pl.Float64)
        f = pl.select(pl.when(has).then(f)).to_series()
        ns = f.to_frame("v").select(ns_from_float(pl.col("v"))).to_series()
        return ns, has
    ns = _ints(*res[f"{key}_ns"])
    if is_typed:  # an Int64 (or all-null) column
        return ns, pl.Series([False] * len(has), dtype=pl.Boolean)
    return ns, pl.Series(res["ts_is_float"]).cast(pl.Boolean)


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
    rest = raw[:begin] + b'"traceEvents":[]' + raw[end:]
    is_typed = typed()
    m = _typed_meta(rest, path) if is_typed else meta(rest)
    if m is None:
        return None
    n = int(res["rows"])
    cols: dict[str, pl.Series] = {}
    for c in _STR:
        cols[c] = _strings(*res[c])
    cols["bp"] = pl.Series([None] * n, dtype=pl.String)  # never read after normalise
    for c in _INT:
        cols[c] = _ints(*res[c])
    cols["ts_ns"], cols["ts_is_float"] = _time(res, "ts", is_typed)
    cols["dur_ns"], _ = _time(res, "dur", is_typed)
    cols["has_ts"] = pl.Series(res["has_ts"]).cast(pl.Boolean)
    cols["has_dur"] = pl.Series(res["has_dur"]).cast(pl.Boolean)
    for c in _INT_ARGS:
        cols[c] = _ints(*res[c])
    for c in _STR_ARGS:
        cols[c] = _strings(*res[c])
    del res
    return pl.DataFrame({k: v.alias(k) for k, v in cols.items()}), m
