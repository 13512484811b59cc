"""HTA's communication / computation overlap (research/kineto-and-hta.md section 4): per rank,
the share of the (merged) communication kernel time during which a computation kernel also
runs."""

from __future__ import annotations

import polars as pl

from stallscope import _arrow
from stallscope.analysis._hta_loading import hta_rows, merge_by_type, sweep
from stallscope.analysis._hta_temporal import hta_pct


def comm_comp_overlap(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank: rank, overlap_ns (time with communication and computation kernels both
    running), comm_time_ns (merged communication time), overlap_pct (HTA's
    comp_comm_overlap_pctg; NaN when the rank ran no communication kernel)."""
    rows = hta_rows(events).filter(pl.col("stream") != -1)
    ranks = rows.select(pl.col("rank").unique().sort())
    # Bit 0 communication, bit 1 computation: ties sort communication first, as HTA's
    # concatenation of the two boundary lists.
    merged = merge_by_type(rows, ("COMMUNICATION", "COMPUTATION"))
    rank, label, dur = sweep(merged, "_k")
    both = label == 3
    overlap = (
        pl.DataFrame(
            {
                "rank": _arrow.series(rank[both], dtype=pl.Int32),
                "dur": _arrow.series(dur[both], dtype=pl.Float64),
            },
            schema={"rank": pl.Int32, "dur": pl.Float64},
        )
        .group_by("rank")
        .agg(overlap=pl.col("dur").sum())
    )
    comm_time = (
        merged.filter(pl.col("_k") == 0)
        .group_by("rank")
        .agg(comm=(pl.col("end") - pl.col("ts")).sum())
    )
    out = (
        ranks.join(overlap, on="rank", how="left")
        .join(comm_time, on="rank", how="left")
        .with_columns(pl.col("overlap").fill_null(0.0), pl.col("comm").fill_null(0.0))
        .sort("rank")
    )
    return out.select(
        "rank",
        overlap_ns=(pl.col("overlap") * 1000.0).round(0).cast(pl.Int64),
        comm_time_ns=(pl.col("comm") * 1000.0).round(0).cast(pl.Int64),
    ).with_columns(overlap_pct=hta_pct(out["overlap"], out["comm"]))
