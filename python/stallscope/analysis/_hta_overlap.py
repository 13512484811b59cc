"""HTA's communication / computation overlap (research/kineto-and-hta.md section 4): per rank,
the share of the (merged) communication kernel time during which a computation kernel also
runs."""

from __future__ import annotations

import polars as pl

from stallscope.analysis._hta_loading import hta_rows, merge_intervals
from stallscope.analysis._hta_temporal import hta_pct


def _sweep(merged: pl.LazyFrame, weight: int) -> pl.LazyFrame:
    return pl.concat(
        [
            merged.select("rank", time=pl.col("ts"), status=pl.lit(weight, pl.Int64)),
            merged.select("rank", time=pl.col("end"), status=pl.lit(-weight, pl.Int64)),
        ]
    )


def comm_comp_overlap(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank: rank, overlap_ns (time with communication and computation kernels both
    running), comm_time_ns (merged communication time), overlap_pct (HTA's
    comp_comm_overlap_pctg; NaN when the rank ran no communication kernel)."""
    rows = hta_rows(events).filter(pl.col("stream") != -1)
    ranks = rows.select(pl.col("rank").unique().sort())
    comp = merge_intervals(rows.filter(pl.col("kernel_type") == "COMPUTATION"))
    comm = merge_intervals(rows.filter(pl.col("kernel_type") == "COMMUNICATION"))
    status = (
        pl.concat([_sweep(comm, 1), _sweep(comp, 2)])
        .sort("rank", "time", maintain_order=True)
        .with_columns(
            running=pl.col("status").cum_sum().over("rank"),
            nxt=pl.col("time").shift(-1).over("rank"),
        )
    )
    overlap = (
        status.filter(pl.col("running") == 3)
        .group_by("rank")
        .agg(overlap=(pl.col("nxt") - pl.col("time")).sum())
    )
    comm_time = comm.group_by("rank").agg(comm=(pl.col("end") - pl.col("ts")).sum())
    out = (
        ranks.lazy()
        .join(overlap, on="rank", how="left")
        .join(comm_time, on="rank", how="left")
        .with_columns(pl.col("overlap").fill_null(0.0), pl.col("comm").fill_null(0.0))
        .sort("rank")
        .collect()
    )
    return out.select(
        "rank",
        overlap_ns=(pl.col("overlap") * 1000.0).round(0).cast(pl.Int64),
        comm_time_ns=(pl.col("comm") * 1000.0).round(0).cast(pl.Int64),
    ).with_columns(overlap_pct=hta_pct(out["overlap"], out["comm"]))
