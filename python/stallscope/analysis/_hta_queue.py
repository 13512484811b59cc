"""HTA's queue length (research/kineto-and-hta.md section 7): per stream, +1 at each launch
runtime call that has a GPU partner, -1 at the start of that GPU op; the running sum in time
order is the number of ops queued on the stream."""

from __future__ import annotations

import polars as pl

from stallscope.analysis._hta_loading import hta_rows

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


def queue_length(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The queue-length time series: rank, stream, ts_ns (HTA's aligned time x1000),
    queue_length; one row per change."""
    rows = hta_rows(events, include_last_profiler_step=False)
    # index_correlation > 0: the launch has a GPU partner in the rank (before the step filter).
    partners = hta_rows(events, include_last_profiler_step=True)
    has_gpu = (
        partners.filter(pl.col("is_gpu") & (pl.col("correlation") != -1))
        .select("rank", "correlation")
        .unique()
    )
    gpu = rows.filter(pl.col("stream") != -1)
    launches = rows.filter(pl.col("name").is_in(LAUNCH_NAMES) & ~pl.col("is_gpu")).join(
        has_gpu, on=["rank", "correlation"], how="semi"
    )
    up = (
        launches.select("rank", "correlation", "ts")
        .join(
            gpu.select("rank", "correlation", "stream").unique(
                subset=["rank", "correlation"], keep="last"
            ),
            on=["rank", "correlation"],
            how="inner",
        )
        .with_columns(queue=pl.lit(1, pl.Int64))
    )
    down = gpu.join(
        launches.select("rank", "correlation"), on=["rank", "correlation"], how="semi"
    ).select("rank", "correlation", "ts", "stream", queue=pl.lit(-1, pl.Int64))
    series = (
        pl.concat([down, up.select(down.columns)])
        .sort("rank", "stream", "ts", maintain_order=True)
        .with_columns(queue_length=pl.col("queue").cum_sum().over("rank", "stream"))
    )
    return series.select(
        "rank",
        "stream",
        ts_ns=(pl.col("ts") * 1000.0).round(0).cast(pl.Int64),
        queue_length="queue_length",
    )


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
