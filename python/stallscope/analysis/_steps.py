"""Steps: the windows between consecutive step markers, per rank, and which step each event
falls in. A step marker is a ``step`` event (stallscope.step(), or an imported ProfilerStep#N);
window k runs from marker k to the next marker of the same rank."""

from __future__ import annotations

import polars as pl


def step_windows(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank and step: rank, step, start_ns, end_ns, step_ns.

    Markers are instants (stallscope.step()) or ranges (imported ProfilerStep#N, whose end is
    then the window's end when no later marker comes first)."""
    m = (
        events.lazy()
        .filter(pl.col("kind") == "step")
        .select("rank", pl.col("correlation").alias("step"), "start_ns", "end_ns")
        .sort("rank", "start_ns")
    )
    nxt = pl.col("start_ns").shift(-1).over("rank")
    end = (
        pl.when(nxt.is_null())
        .then(pl.when(pl.col("end_ns") > pl.col("start_ns")).then(pl.col("end_ns")))
        .when(pl.col("end_ns") > pl.col("start_ns"))
        .then(pl.min_horizontal(nxt, pl.col("end_ns")))
        .otherwise(nxt)
    )
    return (
        m.with_columns(end_ns=end)
        .filter(pl.col("end_ns").is_not_null())
        .with_columns(step_ns=pl.col("end_ns") - pl.col("start_ns"))
        .collect()
    )


def assign_steps(
    events: pl.DataFrame | pl.LazyFrame, windows: pl.DataFrame | None = None
) -> pl.LazyFrame:
    """`events` with a ``step`` column: the step whose window holds the event's start (null
    outside every window)."""
    w = step_windows(events) if windows is None else windows
    lf = events.lazy().with_row_index("_row").sort("start_ns")
    joined = lf.join_asof(
        w.lazy()
        .select("rank", pl.col("start_ns").alias("_ws"), pl.col("end_ns").alias("_we"), "step")
        .sort("_ws"),
        left_on="start_ns",
        right_on="_ws",
        by="rank",
        strategy="backward",
        check_sortedness=False,  # sorted globally by start above, hence within each rank
    )
    return (
        joined.with_columns(step=pl.when(pl.col("start_ns") < pl.col("_we")).then(pl.col("step")))
        .sort("_row")
        .drop("_row", "_ws", "_we")
    )
