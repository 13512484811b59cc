"""HTA's temporal breakdown (docs/hta-compatibility.md section 3), per rank: the span of GPU
activity (kernel_time), the part with no stream busy (idle), the part with a computation kernel
running (compute), and the rest (communication, memory and other ops not under compute)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope._utils.sorted import segment_starts
from stallscope.analysis.hta._loading import (
    KERNEL_TYPES,
    gpu_arrays,
    hta_arrays,
    merge_arrays,
    us_to_ns,
)


def hta_pct(part: np.ndarray[Any, Any], whole: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """round(100 * part / whole, 2) as pandas does it (numpy's half-to-even on the scaled value);
    NaN where whole is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray[Any, Any] = np.round(100 * (part / whole), 2)
    return out


def _per_rank(
    rank: np.ndarray[Any, Any], ts: np.ndarray[Any, Any], end: np.ndarray[Any, Any]
) -> tuple[np.ndarray[Any, Any], ...]:
    """Per rank (sorted): the rank, the first ts, the last end, and the busy time
    sum(end) - sum(ts) of the rank's merged intervals (HTA's order of operations)."""
    keep, mts, mend = merge_arrays([rank], ts, end)
    if keep.size == 0:
        return rank[:0], mts, mend, mts
    r = rank[keep]
    heads = np.flatnonzero(segment_starts(r))
    tails = np.append(heads[1:], r.size) - 1
    busy = np.add.reduceat(mend, heads) - np.add.reduceat(mts, heads)
    return r[heads], mts[heads], mend[tails], busy


@fair_gil
def temporal_breakdown(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank: rank, kernel_time_ns, idle_time_ns, compute_time_ns,
    non_compute_time_ns, idle_pct, compute_pct, non_compute_pct (HTA's
    get_temporal_breakdown; times are HTA's µs x 1000)."""
    rank, ts, end, kt = gpu_arrays(hta_arrays(events, gpu_only=True))
    ranks, first, last, run_time = _per_rank(rank, ts, end)
    comp = kt == KERNEL_TYPES.index("COMPUTATION")
    c_ranks, _, _, c_time = _per_rank(rank[comp], ts[comp], end[comp])
    compute = np.zeros(ranks.size)
    compute[np.searchsorted(ranks, c_ranks)] = c_time
    kernel = last - first
    idle = kernel - run_time
    non_compute = kernel - compute - idle

    return _arrow.frame(
        {
            "rank": _arrow.series(ranks, dtype=pl.Int32),
            "kernel_time_ns": us_to_ns(kernel),
            "idle_time_ns": us_to_ns(idle),
            "compute_time_ns": us_to_ns(compute),
            "non_compute_time_ns": us_to_ns(non_compute),
            "idle_pct": hta_pct(idle, kernel),
            "compute_pct": hta_pct(compute, kernel),
            "non_compute_pct": hta_pct(non_compute, kernel),
        }
    )
