"""HTA's idle time breakdown (docs/hta-compatibility.md section 5), per rank and stream: each gap
before a kernel / memcpy / memset is host wait (the CPU launched the op only after the stream
drained), kernel wait (a gap under `consecutive_kernel_delay` µs) or other."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from stallscope._schema import kind_mask
from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope.analysis.hta._loading import hta_arrays

OP_KINDS = ("kernel", "memcpy", "memset")
CATEGORIES = ("host_wait", "kernel_wait", "other")  # sorted: the output's order within a stream
_SCHEMA = {
    "rank": pl.Int32,
    "stream": pl.Int64,
    "idle_category": pl.String,
    "idle_time_ns": pl.Int64,
    "idle_time_ratio": pl.Float64,
}


@fair_gil
def idle_time_breakdown(
    events: pl.DataFrame | pl.LazyFrame, *, consecutive_kernel_delay: float = 30
) -> pl.DataFrame:
    """rank, stream, idle_category (host_wait / kernel_wait / other), idle_time_ns,
    idle_time_ratio (share of the stream's idle time). `consecutive_kernel_delay` is in µs
    (trace units) as in HTA."""
    rows = hta_arrays(events, gpu_only=True)
    op = np.flatnonzero((rows.stream != -1) & _OP_KIND[rows.kind])
    return idle_from_arrays(
        rows.rank[op],
        rows.stream[op],
        rows.ts[op],
        rows.end[op],
        rows.runtime[op],
        consecutive_kernel_delay,
    )


_OP_KIND = kind_mask(OP_KINDS)


def idle_from_arrays(
    rank: np.ndarray[Any, Any],
    stream: np.ndarray[Any, Any],
    ts: np.ndarray[Any, Any],
    end: np.ndarray[Any, Any],
    runtime: np.ndarray[Any, Any],
    consecutive_kernel_delay: float,
) -> pl.DataFrame:
    """The breakdown from the ops' rank, stream, ts, end and ts_runtime (NaN: none), in one
    NumPy pass: sort once by (rank, stream, ts), label each gap, sum per label with bincount."""
    if ts.size == 0:
        return pl.DataFrame(schema=_SCHEMA)
    # Each op's gap to the previous op of its stream (by ts, ties in row order).
    order = np.lexsort((ts, stream, rank))
    rank, stream, ts, end, runtime = (x[order] for x in (rank, stream, ts, end, runtime))
    first = np.ones(len(ts), dtype=bool)
    first[1:] = (rank[1:] != rank[:-1]) | (stream[1:] != stream[:-1])
    prev_end = np.concatenate([[np.nan], end[:-1]])
    prev_end[first] = np.nan
    idle = ts - prev_end
    # NaN compares false: a stream's first op has no gap and counts as "other", adding nothing.
    cat = np.where(runtime > prev_end, 0, np.where(idle < consecutive_kernel_delay, 1, 2))
    group = np.cumsum(first) - 1
    key = group * len(CATEGORIES) + cat
    n = (group[-1] + 1) * len(CATEGORIES)
    seen = np.bincount(key, minlength=n) > 0
    total = np.bincount(key, weights=np.nan_to_num(idle), minlength=n)
    per_stream = total.reshape(-1, len(CATEGORIES)).sum(axis=1)
    where = np.flatnonzero(seen)
    g, c = where // len(CATEGORIES), where % len(CATEGORIES)
    starts = np.flatnonzero(first)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = total[where] / per_stream[g]
    return _arrow.frame(
        {
            "rank": _arrow.series(rank[starts][g], dtype=pl.Int32),
            "stream": _arrow.series(stream[starts][g], dtype=pl.Int64),
            "idle_category": _arrow.strings(CATEGORIES, c),
            "idle_time_ns": _arrow.series(np.round(total[where] * 1000.0), dtype=pl.Int64),
            # HTA reports the ratio rounded to 2 decimals (numpy's rounding).
            "idle_time_ratio": _arrow.series(np.round(ratio, 2), dtype=pl.Float64),
        }
    )


def idle_by_cause(breakdown: pl.DataFrame) -> pl.DataFrame:
    """`idle_time_breakdown`'s rows as one row per rank and stream: rank, stream, then one column
    per cause in CATEGORIES order (those present), in ms; a cause a stream never had is 0."""
    wide = (
        breakdown.with_columns(pl.col("idle_time_ns") / 1e6)
        .pivot("idle_category", index=["rank", "stream"], values="idle_time_ns")
        .sort("rank", "stream")
    )
    causes = [c for c in CATEGORIES if c in wide.columns]
    return wide.select("rank", "stream", *(pl.col(c).fill_null(0.0) for c in causes))
