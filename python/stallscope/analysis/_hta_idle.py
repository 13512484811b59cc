"""HTA's idle time breakdown (research/kineto-and-hta.md section 5), per rank and stream: each gap
before a kernel / memcpy / memset is host wait (the CPU launched the op only after the stream
drained), kernel wait (a gap under `consecutive_kernel_delay` µs) or other."""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope.analysis._hta_loading import hta_rows

OP_KINDS = ("kernel", "memcpy", "memset")


def idle_time_breakdown(
    events: pl.DataFrame | pl.LazyFrame, *, consecutive_kernel_delay: float = 30
) -> pl.DataFrame:
    """rank, stream, idle_category (host_wait / kernel_wait / other), idle_time_ns,
    idle_time_ratio (share of the stream's idle time). `consecutive_kernel_delay` is in µs
    (trace units) as in HTA."""
    rows = hta_rows(events).filter((pl.col("stream") != -1) & pl.col("kind").is_in(OP_KINDS))
    prev_end = pl.col("end").shift(1).over("rank", "stream")
    gaps = (
        rows.lazy()
        .sort("rank", "stream", "ts", maintain_order=True)
        .with_columns(prev_end=prev_end)
        .with_columns(idle=pl.col("ts") - pl.col("prev_end"))
        .with_columns(
            idle_category=pl.when((pl.col("ts_runtime") > pl.col("prev_end")).fill_null(False))
            .then(pl.lit("host_wait"))
            .when((pl.col("idle") < consecutive_kernel_delay).fill_null(False))
            .then(pl.lit("kernel_wait"))
            .otherwise(pl.lit("other"))
        )
        .group_by("rank", "stream", "idle_category")
        .agg(idle=pl.col("idle").sum())
        .with_columns(idle_time_ratio=pl.col("idle") / pl.col("idle").sum().over("rank", "stream"))
        .sort("rank", "stream", "idle_category")
    )
    out = gaps.select(
        "rank",
        "stream",
        "idle_category",
        idle_time_ns=(pl.col("idle") * 1000.0).round(0).cast(pl.Int64),
        idle_time_ratio="idle_time_ratio",
    ).collect()
    # HTA reports the ratio rounded to 2 decimals (numpy's rounding).
    ratio = np.round(out["idle_time_ratio"].to_numpy(), 2)
    return out.with_columns(idle_time_ratio=pl.Series(ratio, dtype=pl.Float64))
