"""`stallscope report RUN --hta`: HolisticTraceAnalysis' views of the GPU timeline (the numbers
HTA 0.5.0 gives on the same traces), after the stall tables."""

from __future__ import annotations

from typing import Any

import polars as pl

from stallscope.analysis.hta._idle import idle_by_cause
from stallscope.cli.render import MS, label


def hta_views(events: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The views, by the name of the function that makes each (ns, as they return them)."""
    from stallscope.analysis import (
        comm_comp_overlap,
        idle_time_breakdown,
        kernel_type_breakdown,
        temporal_breakdown,
    )

    return {
        f.__name__: f(events)
        for f in (temporal_breakdown, comm_comp_overlap, idle_time_breakdown, kernel_type_breakdown)
    }


def hta_json(views: dict[str, pl.DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """The views as JSON rows (NaN, which JSON lacks, as null)."""
    return {
        k: v.with_columns(pl.col(pl.Float64).fill_nan(None)).to_dicts() for k, v in views.items()
    }


def print_hta(views: dict[str, pl.DataFrame], max_rows: int) -> None:
    """Print the views: GPU time per rank (the span of its GPU activity, split as HTA's
    temporal breakdown does, and its comm/comp overlap), idle time per rank and stream by
    cause, kernel time by type. A run without GPU kernels gets a line saying so."""
    import click

    from stallscope.cli.render import print_frame

    temporal = views["temporal_breakdown"]
    if temporal.height == 0:
        click.echo("HTA views: no GPU kernels in this run (they need a CUDA trace)")
        return
    overlap = views["comm_comp_overlap"].select("rank", "overlap_pct")
    per_rank = temporal.join(overlap, on="rank", how="left").select(
        "rank",
        (pl.col("kernel_time_ns") / MS).alias("kernel_ms"),
        "idle_pct",
        "compute_pct",
        "non_compute_pct",
        pl.col("overlap_pct").fill_nan(None),
    )
    print_frame(
        per_rank,
        title="GPU time per rank (HTA)",
        max_rows=max_rows,
        digits={"kernel_ms": 3}
        | dict.fromkeys(("idle_pct", "compute_pct", "non_compute_pct", "overlap_pct"), 1),
        labels={
            "kernel_ms": "GPU span ms",  # HTA's kernel_time: first kernel start to last end
            "idle_pct": "idle %",
            "compute_pct": "compute %",
            "non_compute_pct": "non-compute %",
            "overlap_pct": "comm overlapped %",
        },
    )
    idle = views["idle_time_breakdown"]
    if idle.height:
        wide = idle_by_cause(idle)
        causes = wide.columns[2:]
        print_frame(
            wide,
            title="GPU idle time by cause (HTA, ms)",
            max_rows=max_rows,
            digits=3,
            labels={c: label(c) for c in causes},
        )
    types = views["kernel_type_breakdown"].select(
        "kernel_type", (pl.col("time_ns") / MS).alias("time_ms"), "percentage"
    )
    print_frame(
        types,
        title="GPU kernel time by type (HTA, all ranks)",
        max_rows=max_rows,
        digits={"time_ms": 3, "percentage": 1},
        labels={"kernel_type": "kernel type", "time_ms": "time ms", "percentage": "%"},
    )
