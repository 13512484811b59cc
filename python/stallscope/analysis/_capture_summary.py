"""What was captured, per rank and step: counts and time per kind and category. A plain summary
of raw events (not the stall attribution: see stall_table)."""

from __future__ import annotations

import polars as pl

from stallscope._utils.gil import fair_gil
from stallscope.analysis._steps import assign_steps, step_windows


@fair_gil
def capture_summary(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank and step: step_ns, events, regions, and the summed duration (ns) of the
    region time per category (nested regions each count) (``<category>_ns``) and of data waits
    (``data_wait_ns``)."""
    windows = step_windows(events)
    ev = assign_steps(events, windows).filter(pl.col("step").is_not_null())
    dur = pl.col("end_ns") - pl.col("start_ns")
    per = ev.group_by("rank", "step").agg(
        events=pl.len(),
        regions=(pl.col("kind") == "region").sum(),
        data_wait_ns=dur.filter(pl.col("kind") == "data_wait").sum(),
        compute_ns=dur.filter(
            (pl.col("kind") == "region") & (pl.col("category") == "compute")
        ).sum(),
        host_ns=dur.filter((pl.col("kind") == "region") & (pl.col("category") == "host")).sum(),
    )
    return (
        windows.lazy()
        .join(per, on=["rank", "step"], how="left")
        .with_columns(
            pl.col("events", "regions", "data_wait_ns", "compute_ns", "host_ns").fill_null(0)
        )
        .sort("rank", "step")
        .collect()
    )
