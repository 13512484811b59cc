"""HTA's CUDA kernel launch statistics (research/kineto-and-hta.md section 7): each launch
runtime call joined to its GPU op by correlation; launch delay = GPU start minus the end of the
runtime call, clipped at 0."""

from __future__ import annotations

import polars as pl

from stallscope.analysis._hta_loading import hta_rows

LAUNCHES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "runFunction - job_prep_and_submit_for_execution",
)
MEMORY_LAUNCHES = ("cudaMemcpyAsync", "cudaMemsetAsync")


def launch_stats(
    events: pl.DataFrame | pl.LazyFrame, *, include_memory_events: bool = True
) -> pl.DataFrame:
    """One row per launch: rank, correlation, cpu_duration_ns, gpu_duration_ns,
    launch_delay_ns."""
    rows = hta_rows(events)
    names = LAUNCHES + (MEMORY_LAUNCHES if include_memory_events else ())
    launched = rows.filter(pl.col("name").is_in(names)).select("rank", "correlation").unique()
    cpu = rows.filter(pl.col("stream") == -1).join(launched, on=["rank", "correlation"])
    gpu = rows.filter(pl.col("stream") != -1).join(launched, on=["rank", "correlation"])
    joined = cpu.select("rank", "correlation", "ts", "dur").join(
        gpu.select("rank", "correlation", "ts", "dur"), on=["rank", "correlation"], suffix="_gpu"
    )
    ns = 1000.0
    return joined.select(
        "rank",
        "correlation",
        cpu_duration_ns=(pl.col("dur") * ns).round(0).cast(pl.Int64),
        gpu_duration_ns=(pl.col("dur_gpu") * ns).round(0).cast(pl.Int64),
        launch_delay_ns=((pl.col("ts_gpu") - pl.col("ts") - pl.col("dur")).clip(lower_bound=0) * ns)
        .round(0)
        .cast(pl.Int64),
    ).sort("rank", "correlation")


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
