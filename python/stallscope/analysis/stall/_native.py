"""The rank-local part of the stall table in C++ (csrc/analysis/stall_sweep.cc): one pass per
rank over plain columns, the GIL released.

`native_local_parts` gives what `local_parts` (_exposed.py, the Polars reference) gives, for
every events frame: the frame is brought to the event schema's types first, and rows with a
null rank, kind, start or end are dropped, as the reference does. The sweep computes the step
windows, each window's time per category with every collective taken as transfer (CPU runs:
compute regions minus the time their thread is blocked on communication), and the exposed
communication. What stays in Python and Polars: the details of the comm rows (parsed once per
distinct value: nodes spanned, async, last bucket) and the arrivals at the collectives
(`_arrivals`, on the comm rows only). `sweep` also takes clock offsets, so that a run
directory's columns are aligned inside the pass instead of in a copy (stream_run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope import _core
from stallscope._schema import KIND_ID, SCHEMA, conform, detail_value, kind_mask
from stallscope._utils import arrow as _arrow
from stallscope.analysis.stall._exposed import (
    EXPOSED_SCHEMA,
    LocalParts,
    _arrivals,
    split_sync_wait,
)
from stallscope.analysis.stall._sources import _NULL_CAT, _TABLES, ATTRIBUTED, COMM_KINDS, NEEDED
from stallscope.analysis.stall._table import empty_table
from stallscope.exceptions import StallscopeError
from stallscope.io._load import Clock

Array = np.ndarray[Any, Any]

_COMM_KIND: Final = kind_mask(COMM_KINDS).astype(np.uint8)
_COLL_KIND: Final = kind_mask(("collective", "p2p"))
_GPU_KIND: Final = kind_mask(("kernel", "memcpy", "memset", "gpu_sync")).astype(np.uint8)
_LABELS: Final = {gpu: t.astype(np.int8) for gpu, t in _TABLES.items()}
_REQUIRED: Final = ("rank", "kind", "start_ns", "end_ns")
_COLUMNS: Final = (*NEEDED, "name", "detail")


class BadDetailError(StallscopeError, ValueError):
    """A collective's detail says nnodes= with a value that is no integer."""


@dataclass
class Swept:
    """What the sweep of a frame gives (`sweep`)."""

    parts: LocalParts  # arrivals empty: the caller's (from the comm rows, aligned)
    ranks: Array  # the ranks of the rows, sorted
    exposed: tuple[Array, Array, Array, Array]  # parts.exposed's rank, start, end, network


def conformed(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """`events` with the columns the sweep reads in the event schema's types (a frame that
    has them is taken as it is), rows with a null rank, kind, start or end dropped."""
    if isinstance(events, pl.LazyFrame):
        df = conform(events).collect()
    else:
        have = events.schema
        ok = all(c in have and have[c] == SCHEMA[c] for c in _COLUMNS)
        df = events if ok else conform(events).collect()
    if any(df[c].null_count() for c in _REQUIRED):
        df = df.drop_nulls(_REQUIRED)
    return df


def _facts(codes: Array, distinct: list[str], coll: Array) -> tuple[Array, Array, Array]:
    """Per comm row (its detail's code into `distinct`; `coll`: the collective / p2p rows):
    nnodes (1 when not said; parsed on collective / p2p rows only, as the reference does),
    async=1 and last=1 flags; each distinct detail parsed once."""
    nn_text = [detail_value(d, "nnodes") for d in distinct]
    nn_coll = np.zeros(len(distinct), bool)  # the distinct values seen on collective rows
    nn_coll[np.unique(codes[coll])] = True
    try:
        cast = pl.Series(
            [t if c else None for t, c in zip(nn_text, nn_coll, strict=True)], dtype=pl.String
        ).cast(pl.Int32)
    except pl.exceptions.InvalidOperationError as e:
        raise BadDetailError(
            f"a collective's detail has an nnodes= value that is no integer ({e}); the "
            "number of nodes its group spans must be written as nnodes=<int>"
        ) from None
    nnodes = cast.fill_null(1).to_numpy().astype(np.int32)
    asyn = np.array([detail_value(d, "async") == "1" for d in distinct], np.uint8)
    last = np.array([detail_value(d, "last") == "1" for d in distinct], np.uint8)
    return nnodes[codes], asyn[codes], last[codes]


def sweep(
    df: pl.DataFrame,
    *,
    gpu: bool = False,
    multi: Sequence[int] | Array | None = None,
    clocks: dict[int, Clock] | None = None,
    exposed_frame: bool = True,
) -> Swept:
    """The local table and exposed communication of `df` (`conformed`'s frame; times on each
    rank's clock, moved onto rank 0's by `clocks` when given, as load() moves them). Without
    `exposed_frame`, parts.exposed is left empty: the arrays are in Swept.exposed."""
    kind = _arrow.enum_codes(df["kind"])
    category = _arrow.enum_codes(df["category"], _NULL_CAT)
    corr_s = df["correlation"]
    corr_null = corr_s.is_null().to_numpy().view(np.uint8) if corr_s.null_count() else None
    # the comm rows and their details' codes (a null detail reads as "": it says nothing
    # either), the other rows' details never read
    comm_row, codes, distinct = _core.string_codes_where(df["detail"], kind, _COMM_KIND)
    nnodes, asyn, last = _facts(codes.astype(np.intp), distinct, _COLL_KIND[kind[comm_row]])
    out = _core.stall_sweep(
        kind.astype(np.uint8, copy=False),
        category.astype(np.uint8, copy=False),
        _arrow.int_values(df["rank"], np.int32, 0),
        df["start_ns"].to_numpy(),
        df["end_ns"].to_numpy(),
        _arrow.int_values(df["lane"], np.int32, 0),
        _arrow.int_values(corr_s, np.int64, 0),
        corr_null,
        _LABELS[False],
        _LABELS[True],
        _GPU_KIND,
        _NULL_CAT + 1,
        KIND_ID["step"],
        KIND_ID["bucket"],
        comm_row,
        nnodes,
        asyn,
        last,
        [(r, c.t_a, c.o_a, c.slope) for r, c in (clocks or {}).items()],
        gpu,
        [] if multi is None else [int(r) for r in multi],
    )
    parts = LocalParts(
        _table(out),
        _exposed(out) if exposed_frame else pl.DataFrame(schema=EXPOSED_SCHEMA),
        _arrivals(None),
        bool(out["gpu"]),
        np.asarray(out["multi"], np.int32) if out["windows"] else _given(multi),
    )
    x = (out["x_rank"], out["x_step_start"], out["x_start"], out["x_end"], out["x_network"])
    return Swept(parts, out["ranks"], (x[0], x[2], x[3], x[4]))


def _given(multi: Sequence[int] | Array | None) -> Array:
    return np.zeros(0, np.int32) if multi is None else np.asarray(multi, np.int32)


def _table(out: dict[str, Any]) -> pl.DataFrame:
    if out["windows"] == 0:
        return empty_table()
    step = _arrow.series(out["step"], "step", pl.Int64)
    null = out["step_null"]
    if null.any():
        step = step.scatter(np.flatnonzero(null), None)
    sums = out["sums"]
    start, end = out["start"], out["end"]
    step_ns = end - start
    host = step_ns - np.sum(sums, axis=0)
    return _arrow.frame(
        {
            "rank": out["rank"],
            "step": step,
            "start_ns": start,
            "end_ns": end,
            "step_ns": step_ns,
            **{f"{c}_ns": s for c, s in zip(ATTRIBUTED, sums, strict=True)},
            "host_ns": host,
        }
    )


def _exposed(out: dict[str, Any]) -> pl.DataFrame:
    if out["windows"] == 0:
        return pl.DataFrame(schema=EXPOSED_SCHEMA)
    return _arrow.frame(
        {
            "rank": out["x_rank"],
            "step_start_ns": out["x_step_start"],
            "start_ns": out["x_start"],
            "end_ns": out["x_end"],
            "network": out["x_network"],
        }
    )


def native_local_parts(
    events: pl.DataFrame | pl.LazyFrame, *, gpu: bool = False, multi: Array | None = None
) -> LocalParts:
    """`local_parts` (the Polars reference, _exposed.py) in one C++ pass per rank."""
    df = conformed(events)
    parts = sweep(df, gpu=gpu, multi=multi).parts
    kind = _arrow.enum_codes(df["kind"])
    coll = np.flatnonzero(_COLL_KIND[kind])
    if coll.size:
        cols = ("rank", "kind", "name", "start_ns", "end_ns", "correlation", "detail")
        comm = _arrow.frame_of([df.get_column(c).gather(_arrow.series(coll)) for c in cols])
        parts.arrivals = _arrivals(comm)
    return parts


def native_stall_table(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """stall_table(events) from the native local parts and the sync wait split off from their
    arrivals (equal to the reference, _exposed.py's docstring says why)."""
    parts = native_local_parts(events)
    return split_sync_wait(parts.table, parts.exposed, parts.arrivals)
