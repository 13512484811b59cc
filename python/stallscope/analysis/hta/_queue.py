"""HTA's queue length (docs/hta-compatibility.md section 8): per stream, +1 at each launch
runtime call that has a GPU partner, -1 at the start of that GPU op; the running sum in time
order is the number of ops queued on the stream."""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope._utils.sorted import lookup, segment_starts
from stallscope.analysis.hta._loading import hta_arrays, us_to_ns

LAUNCH_NAMES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
    "runFunction - job_prep_and_submit_for_execution",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemsetAsync",
    "hipMemcpyAsync",
    "hipMemcpyWithStream",
)


@fair_gil
def queue_length(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The queue-length time series: rank, stream, ts_ns (HTA's aligned time x1000, rounded half
    to even), queue_length; one row per change, sorted by rank, stream and time.

    HTA's joins on arrays of its rows: a launch (a runtime call named in LAUNCH_NAMES) counts
    when its (rank, correlation) has a GPU row before the last-step filter; it adds 1 on the
    stream of the last GPU row with its key, at its own ts; each GPU row with a counted launch's
    key takes 1 off at its ts. Ties in time: the GPU rows' steps first, each part in row order."""
    rows = hta_arrays(events, include_last_profiler_step=False)
    partners = hta_arrays(events, include_last_profiler_step=True)
    rank, corr, stream = rows.rank.astype(np.int64), rows.correlation, rows.stream
    m = len(rank)
    # Keys with a GPU partner (index_correlation > 0 in HTA), appended after the rows' own.
    p = np.flatnonzero(partners.is_gpu.astype(bool) & (partners.correlation != -1))
    rank_all = np.concatenate([rank, partners.rank[p].astype(np.int64)])
    corr_all = np.concatenate([corr, partners.correlation[p]])
    named = rows.named(LAUNCH_NAMES)
    candidates = np.flatnonzero(named & ~rows.is_gpu.astype(bool))
    _, found, _, _ = lookup(rank_all, corr_all, np.arange(m, m + len(p)), candidates)
    launches = candidates[found]
    gpu = np.flatnonzero(stream != -1)
    # Up: each launch on the stream of the last GPU row with its key (none: no step).
    order, found, _, last = lookup(rank, corr, gpu, launches)
    up = launches[found]
    up_stream = stream[gpu[order][last[found]]]
    # Down: the GPU rows whose key a counted launch has.
    _, found, _, _ = lookup(rank, corr, launches, gpu)
    down = gpu[found]
    r = np.concatenate([rank[down], rank[up]])
    s = np.concatenate([stream[down], up_stream])
    ts = np.concatenate([rows.ts[down], rows.ts[up]])
    step = np.concatenate([np.full(len(down), -1, np.int64), np.ones(len(up), np.int64)])
    o = np.lexsort((ts, s, r))  # stable: on ties, the GPU rows' steps first
    r, s, ts, step = r[o], s[o], ts[o], step[o]
    running = np.cumsum(step)
    head = np.flatnonzero(segment_starts(r, s))
    before = np.concatenate([[0], running[head[1:] - 1]]) if len(head) else head
    sizes = np.diff(np.append(head, len(r)))
    return pl.DataFrame(
        [
            _arrow.series(r, "rank", pl.Int32),
            _arrow.series(s, "stream", pl.Int64),
            _arrow.series(us_to_ns(ts), "ts_ns"),
            _arrow.series(running - np.repeat(before, sizes), "queue_length", pl.Int64),
        ]
    )


@fair_gil
def queue_length_summary(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Per rank and stream, pandas' describe() of the queue length: count, mean, std, min, p25,
    p50, p75, max."""
    q = pl.col("queue_length")
    return (
        queue_length(events)
        .group_by("rank", "stream")
        .agg(
            count=pl.len(),
            mean=q.mean(),
            std=q.std(),
            min=q.min(),
            p25=q.quantile(0.25, "linear"),
            p50=q.quantile(0.5, "linear"),
            p75=q.quantile(0.75, "linear"),
            max=q.max(),
        )
        .sort("rank", "stream")
    )
