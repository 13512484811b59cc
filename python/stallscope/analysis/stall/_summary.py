"""Stall tables summarised across ranks (per step) and over the whole run."""

from __future__ import annotations

import polars as pl

from stallscope._utils.gil import fair_gil
from stallscope.analysis.stall._table import STALL_CATEGORIES, STALL_COLUMNS, stall_table


def _table(events_or_table: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The stall table: `events_or_table` itself when it already is one (it has step_ns and
    no event kind column), else stall_table of the events."""
    names = events_or_table.lazy().collect_schema().names()
    if "step_ns" in names and "kind" not in names:
        missing = [c for c in ("rank", "step", *STALL_COLUMNS) if c not in names]
        if missing:
            raise ValueError(
                f"stall table lacks column(s) {missing}; pass events or stall_table(events)"
            )
        return events_or_table.lazy().collect()
    return stall_table(events_or_table)


@fair_gil
def stall_summary(events_or_table: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per step across ranks: step, ranks (how many ranks ran it), slowest_rank (the
    rank with the longest step; the lowest such rank on a tie), step_max_ns, step_median_ns,
    and for each stall category ``<category>_max_ns`` and ``<category>_median_ns`` (medians
    rounded to whole ns).

    Takes events (as for stall_table) or a stall table."""
    t = _table(events_or_table)
    med = [
        pl.col(c).median().round().cast(pl.Int64).alias(c.removesuffix("_ns") + "_median_ns")
        for c in ("step_ns", *STALL_COLUMNS)
    ]
    mx = [pl.col(c).max().alias(c.removesuffix("_ns") + "_max_ns") for c in STALL_COLUMNS]
    slowest = pl.col("rank").sort_by(["step_ns", "rank"], descending=[True, False]).first()
    order = ["step", "ranks", "slowest_rank", "step_max_ns", "step_median_ns"]
    for c in STALL_CATEGORIES:
        order += [f"{c}_max_ns", f"{c}_median_ns"]
    return (
        t.lazy()
        .group_by("step")
        .agg(
            pl.len().cast(pl.Int32).alias("ranks"),
            slowest.alias("slowest_rank"),
            pl.col("step_ns").max().alias("step_max_ns"),
            *med,
            *mx,
        )
        .select(order)
        .sort("step")
        .collect()
    )


@fair_gil
def stall_run_summary(events_or_table: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per stall category (in priority order, host last) over the whole run: category,
    total_ns (summed over ranks and steps), share (fraction of the summed step time; the
    shares sum to 1), per_step_ns (mean over rank-steps, rounded to whole ns).

    Takes events (as for stall_table) or a stall table."""
    t = _table(events_or_table)
    total = t["step_ns"].sum() if t.height else 0
    totals = [int(t[c].sum()) for c in STALL_COLUMNS]
    return pl.DataFrame(
        {
            "category": list(STALL_CATEGORIES),
            "total_ns": totals,
            "share": [v / total if total else 0.0 for v in totals],
            "per_step_ns": [round(v / t.height) if t.height else 0 for v in totals],
        },
        schema={
            "category": pl.Enum(list(STALL_CATEGORIES)),
            "total_ns": pl.Int64(),
            "share": pl.Float64(),
            "per_step_ns": pl.Int64(),
        },
    )
