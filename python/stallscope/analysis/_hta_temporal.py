"""HTA's temporal breakdown (research/kineto-and-hta.md section 3), per rank: the span of GPU
activity (kernel_time), the part with no stream busy (idle), the part with a computation kernel
running (compute), and the rest (communication, memory and other ops not under compute)."""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope import _arrow
from stallscope.analysis._hta_loading import hta_rows, merge_intervals


def hta_pct(part: pl.Series, whole: pl.Series) -> pl.Series:
    """round(100 * part / whole, 2) as pandas does it (numpy's half-to-even on the scaled value)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.round(100 * (part.to_numpy() / whole.to_numpy()), 2)
    return _arrow.series(values, dtype=pl.Float64)


def _us_to_ns(col: str) -> pl.Expr:
    return (pl.col(col) * 1000.0).round(0).cast(pl.Int64)


def temporal_breakdown(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank: rank, kernel_time_ns, idle_time_ns, compute_time_ns,
    non_compute_time_ns, idle_pct, compute_pct, non_compute_pct (HTA's
    get_temporal_breakdown; times are HTA's µs x 1000)."""
    rows = hta_rows(events).filter(pl.col("stream") != -1)
    merged = merge_intervals(rows)
    busy = merged.group_by("rank").agg(
        kernel_time=pl.col("end").last() - pl.col("ts").first(),
        run_time=pl.col("end").sum() - pl.col("ts").sum(),
    )
    comp = (
        merge_intervals(rows.filter(pl.col("kernel_type") == "COMPUTATION"))
        .group_by("rank")
        .agg(compute_time=pl.col("end").sum() - pl.col("ts").sum())
    )
    out = (
        busy.join(comp, on="rank", how="left")
        .with_columns(pl.col("compute_time").fill_null(0.0))
        .with_columns(idle_time=pl.col("kernel_time") - pl.col("run_time"))
        .with_columns(
            non_compute_time=pl.col("kernel_time") - pl.col("compute_time") - pl.col("idle_time")
        )
        .sort("rank")
        .collect()
    )
    kt = out["kernel_time"]
    return out.select(
        "rank",
        kernel_time_ns=_us_to_ns("kernel_time"),
        idle_time_ns=_us_to_ns("idle_time"),
        compute_time_ns=_us_to_ns("compute_time"),
        non_compute_time_ns=_us_to_ns("non_compute_time"),
    ).with_columns(
        idle_pct=hta_pct(out["idle_time"], kt),
        compute_pct=hta_pct(out["compute_time"], kt),
        non_compute_pct=hta_pct(out["non_compute_time"], kt),
    )
