"""Stragglers: which ranks held the others back in collectives (analysis.stragglers)."""

from __future__ import annotations

import polars as pl

from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, esc, figure, table
from stallscope.report._style import MS, SERIES_COLORS, ms


def render(data: ReportData) -> str | NoData:
    from stallscope.report._plot import integer_ticks, pyplot, svg

    s = data.stragglers
    if s is None or s.height == 0:
        return NoData("the run has no collectives matched across ranks")
    per_rank = (
        s.group_by("rank")
        .agg(
            pl.col("caused_wait_ns").sum(),
            pl.col("late_ns").sum(),
            pl.col("last_arrivals").sum(),
            pl.col("straggler").sum().alias("straggler_steps"),
        )
        .sort("rank")
    )
    total_wait = int(per_rank["caused_wait_ns"].sum() or 0)
    if total_wait == 0:
        return '<p class="lead">No rank kept another waiting in a collective.</p>'
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 2.6))
    ax.bar(
        per_rank["rank"].to_numpy(),
        per_rank["caused_wait_ns"].to_numpy() / MS,
        color=SERIES_COLORS[3],
    )
    ax.set_xlabel("rank")
    ax.xaxis.set_major_locator(integer_ticks())
    ax.set_ylabel("others' wait, ms")
    worst = per_rank.sort("caused_wait_ns", descending=True).row(0, named=True)
    steps = s.filter(pl.col("straggler")).select(
        "step", "rank", "caused_wait_ns", "late_ns", "last_arrivals"
    )
    return (
        f'<p class="lead">Rank {worst["rank"]} kept the others waiting longest: '
        f"{esc(ms(worst['caused_wait_ns']))} in all, the straggler of "
        f"{worst['straggler_steps']} step(s). A rank that arrives last at a collective makes "
        "every other member wait (their sync wait).</p>"
        + figure(
            svg(fig, "stragglers"), "Sync wait each rank caused the others, over the run (ms)."
        )
        + "<h3>The straggler of each step</h3>"
        + table(
            steps,
            formats={"caused_wait_ns": ms, "late_ns": ms},
            labels={
                "caused_wait_ns": "others' wait",
                "late_ns": "arrived late by",
                "last_arrivals": "times last",
            },
        )
    )


SECTION = Section("stragglers", "Stragglers", render)
