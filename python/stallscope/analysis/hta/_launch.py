"""HTA's CUDA kernel launch statistics (docs/hta-compatibility.md section 7): each launch
runtime call joined to its GPU op by correlation; launch delay = GPU start minus the end of the
runtime call, clipped at 0."""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope._utils.sorted import lookup
from stallscope.analysis.hta._loading import hta_arrays, us_to_ns

LAUNCHES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "runFunction - job_prep_and_submit_for_execution",
)
MEMORY_LAUNCHES = ("cudaMemcpyAsync", "cudaMemsetAsync")


@fair_gil
def launch_stats(
    events: pl.DataFrame | pl.LazyFrame, *, include_memory_events: bool = True
) -> pl.DataFrame:
    """One row per launch: rank, correlation, cpu_duration_ns, gpu_duration_ns,
    launch_delay_ns; sorted by rank and correlation.

    HTA's join on arrays: the (rank, correlation) keys of the rows named as launches; the CPU
    rows (no stream) and GPU rows (a stream) with such a key, every CPU row paired with every GPU
    row of its key (an inner join). Times from HTA's µs, x1000, rounded half to even."""
    rows = hta_arrays(events)
    names = LAUNCHES + (MEMORY_LAUNCHES if include_memory_events else ())
    named = np.flatnonzero(rows.named(names))
    rank, corr = rows.rank.astype(np.int64), rows.correlation
    on_gpu = rows.stream != -1
    # Rows that can share a launch's key: those with a correlation, and those without one in a
    # rank where a launch has none (-1 matches -1, as in HTA's merge).
    no_corr = corr[named] == -1
    maybe = corr != -1
    if no_corr.any():
        maybe |= np.isin(rank, rank[named[no_corr]]) & (corr == -1)
    candidates = np.flatnonzero(maybe)
    _, found, _, _ = lookup(rank, corr, named, candidates)
    launched = candidates[found]
    cpu = launched[~on_gpu[launched]]
    gpu = launched[on_gpu[launched]]
    # Each CPU row against the GPU rows of its key: gpu[order][first..last].
    order, found, first, last = lookup(rank, corr, gpu, cpu)
    cpu, first, last = cpu[found], first[found], last[found]
    per = last - first + 1
    c = np.repeat(cpu, per)
    within = np.arange(len(c)) - np.repeat(np.cumsum(per) - per, per)
    g = gpu[order][np.repeat(first, per) + within]
    ts_c, ts_g = rows.ts[c], rows.ts[g]
    dur_c, dur_g = rows.end[c] - ts_c, rows.end[g] - ts_g
    delay = np.maximum(ts_g - ts_c - dur_c, 0.0)
    out_rank, out_corr = rank[c], corr[c]
    sort = np.lexsort((out_corr, out_rank))  # stable: a key's pairs keep their row order
    return pl.DataFrame(
        [
            _arrow.series(out_rank[sort], "rank", pl.Int32),
            _arrow.series(out_corr[sort], "correlation", pl.Int64),
            _arrow.series(us_to_ns(dur_c[sort]), "cpu_duration_ns"),
            _arrow.series(us_to_ns(dur_g[sort]), "gpu_duration_ns"),
            _arrow.series(us_to_ns(delay[sort]), "launch_delay_ns"),
        ]
    )


@fair_gil
def launch_stats_summary(
    events: pl.DataFrame | pl.LazyFrame,
    *,
    runtime_cutoff_us: float = 50,
    launch_delay_cutoff_us: float = 100,
) -> pl.DataFrame:
    """Per rank: launches, sums and max of the durations and delays, and HTA's outlier counts
    (GPU op shorter than its runtime call, runtime call over `runtime_cutoff_us`, launch delay
    over `launch_delay_cutoff_us`)."""
    s = launch_stats(events)
    return (
        s.group_by("rank")
        .agg(
            launches=pl.len(),
            cpu_duration_ns=pl.col("cpu_duration_ns").sum(),
            gpu_duration_ns=pl.col("gpu_duration_ns").sum(),
            launch_delay_ns=pl.col("launch_delay_ns").sum(),
            max_launch_delay_ns=pl.col("launch_delay_ns").max(),
            gpu_shorter_than_cpu=(pl.col("gpu_duration_ns") < pl.col("cpu_duration_ns")).sum(),
            long_runtime=(pl.col("cpu_duration_ns") > runtime_cutoff_us * 1000).sum(),
            long_launch_delay=(pl.col("launch_delay_ns") > launch_delay_cutoff_us * 1000).sum(),
        )
        .sort("rank")
    )
