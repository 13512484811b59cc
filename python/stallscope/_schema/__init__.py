"""The event schema: defined here once, mirrored by csrc/core/event_record.h.

Every source of events (native capture, imported Kineto traces, simulated timelines) produces a
Polars frame with exactly these columns, and everything downstream of `load` reads only them.

Columns (time is int64 ns; sizes are bytes):

- ``rank``: global rank of the process that recorded the event.
- ``pid``: OS process id (for imported traces, the trace's pid field).
- ``kind``: what produced the event (`KINDS`).
- ``category``: where its time goes in the stall tables (`CATEGORIES`).
- ``name``: region, kernel, collective or marker name.
- ``start_ns`` / ``end_ns``: start and end, ns, on the rank's process clock until `load` aligns
  them across ranks (then ns on rank 0's clock). Instants have ``end_ns == start_ns``.
- ``lane``: OS thread id for host events, stream id for GPU events.
- ``device``: GPU ordinal, -1 for the host.
- ``correlation``: CUPTI correlation id, step index (kind ``step``), per-group sequence number
  (``collective``), bucket index (``bucket``); 0 when none.
- ``bytes``: payload size; 0 when none.
- ``value``: counter value (kind ``counter``), null otherwise.
- ``detail``: kind-specific ``key=value`` pairs separated by ``;`` (see `parse_detail`), null
  when none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Concatenate, Final, ParamSpec, TypeVar, cast

import numpy as np
import polars as pl

from stallscope.exceptions import EventsError

KINDS: Final[tuple[str, ...]] = (
    "region",
    "mark",
    "step",
    "counter",
    "data_wait",
    "kernel",
    "memcpy",
    "memset",
    "gpu_sync",
    "runtime",
    "marker",
    "collective",
    "p2p",
    "bucket",
    "overhead",
    "clock_sync",
)
"""Event kinds; the position is the value stored in the native record."""

CATEGORIES: Final[tuple[str, ...]] = (
    "host",
    "compute",
    "memcpy",
    "comm",
    "data",
    "data_fetch",
    "data_prep",
    "sync",
    "other",
)
"""Stall categories of events; the position is the value stored in the native record."""

GPU_KINDS: Final[tuple[str, ...]] = ("kernel", "memcpy", "memset", "gpu_sync")
"""The kinds of GPU activity (their lane is a stream)."""

TRACE_MARK: Final = "kineto:trace"
"""The name of the one ``mark`` event per rank of an imported Kineto trace that carries the
file's facts (base time, whether ts was written as floats) in its detail."""

KIND: Final = pl.Enum(list(KINDS))
CATEGORY: Final = pl.Enum(list(CATEGORIES))

KIND_ID: Final[dict[str, int]] = {k: i for i, k in enumerate(KINDS)}
CATEGORY_ID: Final[dict[str, int]] = {c: i for i, c in enumerate(CATEGORIES)}


def kind_mask(kinds: Iterable[str]) -> np.ndarray[Any, Any]:
    """Kind code -> whether the kind is one of `kinds` (bool, indexed by a kind column's codes)."""
    return np.isin(np.arange(len(KINDS)), [KIND_ID[k] for k in kinds])


SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "pid": pl.Int32(),
    "kind": KIND,
    "category": CATEGORY,
    "name": pl.String(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "lane": pl.Int32(),
    "device": pl.Int16(),
    "correlation": pl.Int64(),
    "bytes": pl.Int64(),
    "value": pl.Float64(),
    "detail": pl.String(),
}
"""Column name -> Polars dtype, in column order."""

COLUMNS: Final[tuple[str, ...]] = tuple(SCHEMA)

HOST_DEVICE: Final = -1


REQUIRED: Final[tuple[str, ...]] = ("kind", "name", "start_ns", "end_ns")
"""The columns an events frame cannot do without; `conform` gives the others defaults."""

_P = ParamSpec("_P")
_R = TypeVar("_R")
_E = TypeVar("_E")
Frame = pl.DataFrame | pl.LazyFrame


def _missing(missing: list[str], have: Iterable[str], what: str) -> str:
    hint = (
        " It looks like a stall table (it has step_ns): pass the events it was made from."
        if "step_ns" in have
        else ""
    )
    return (
        f"{what} lacks the event column(s) {missing}; an events frame has {list(COLUMNS)}, as "
        "stallscope.load(run_dir), stallscope.scan(run_dir) or stallscope.import_kineto(...) "
        f"return it.{hint}"
    )


def takes_events(fn: Callable[Concatenate[_E, _P], _R]) -> Callable[Concatenate[_E, _P], _R]:
    """For a function whose first argument is an events frame: a frame without a required
    column raises EventsError naming the function and the fix; one without some optional
    columns gets their defaults (as `conform` gives them; its other columns stay as they are);
    a frame with every column, or any other first argument (a run directory), passes through
    untouched."""

    @functools.wraps(fn)
    def call(events: _E, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if isinstance(events, Frame):
            have = events.collect_schema().names()
            if not all(c in have for c in COLUMNS):
                missing = [c for c in REQUIRED if c not in have]
                if missing:
                    raise EventsError(_missing(missing, have, f"{fn.__name__}: the frame"))
                filled = events.with_columns(  # extra columns (a step column) stay as they are
                    _DEFAULTS[c].cast(SCHEMA[c]).alias(c) for c in COLUMNS if c not in have
                )
                events = cast(_E, filled)
        return fn(events, *args, **kwargs)

    return call


#: The value an optional event column takes where a frame lacks it.
_DEFAULTS: Final[dict[str, pl.Expr]] = {
    "rank": pl.lit(0),
    "pid": pl.lit(0),
    "category": pl.lit("host"),
    "lane": pl.lit(0),
    "device": pl.lit(HOST_DEVICE),
    "correlation": pl.lit(0),
    "bytes": pl.lit(0),
    "value": pl.lit(None),
    "detail": pl.lit(None),
}


def conform(df: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """Cast and order the columns of `df` to the event schema (missing optional columns become
    null / defaults). Raises EventsError (a ValueError) naming a missing required column."""
    lf = df.lazy()
    have = set(lf.collect_schema().names())
    missing = [c for c in REQUIRED if c not in have]
    if missing:
        raise EventsError(_missing(missing, have, "an events frame"))
    return lf.select(
        [
            (pl.col(c) if c in have else _DEFAULTS[c]).cast(dtype).alias(c)
            for c, dtype in SCHEMA.items()
        ]
    )


def _detail_re(key: str) -> str:
    return rf"(?:^|;){key}=([^;]*)"  # key: an identifier (no regex syntax)


def parse_detail(detail: pl.Expr, key: str, dtype: pl.DataType | None = None) -> pl.Expr:
    """Expression extracting `key` from a ``detail`` column (``k=v;k=v``); null when absent."""
    value = detail.str.extract(_detail_re(key), 1)
    return value.cast(dtype) if dtype is not None else value


def detail_value(detail: str | None, key: str) -> str | None:
    """`parse_detail` of one detail string: the value of the first ``key=`` at the start or
    after a ``;``, up to the next ``;``. String methods, not re (a pattern's first compile in a
    process costs ~0.3 ms)."""
    if detail is None:
        return None
    head = key + "="
    if detail.startswith(head):
        i = len(head)
    else:
        i = detail.find(";" + head)
        if i < 0:
            return None
        i += len(head) + 1
    j = detail.find(";", i)
    return detail[i:] if j < 0 else detail[i:j]


def format_detail(pairs: dict[str, object]) -> str:
    """The ``detail`` string for `pairs` (values must not contain ``;`` or ``=``)."""
    return ";".join(f"{k}={v}" for k, v in pairs.items())
