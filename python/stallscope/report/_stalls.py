"""Stall bars: each step's time per rank, stacked by category in the categories' fixed colours.
Up to 8 ranks get a row of bars each; more ranks, the slowest rank of each step and each rank's
mean step. Over 150 steps, stacked areas instead of bars (a bar per step would bloat the page)."""

from __future__ import annotations

from typing import Any

import polars as pl

from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, figure
from stallscope.report._style import CATEGORY_COLORS, MS

MAX_RANK_ROWS = 8
MAX_BARS = 150


def _stack(ax: Any, x: Any, frame: pl.DataFrame, cats: list[str], bars: bool) -> None:
    import numpy as np

    bottom = np.zeros(frame.height)
    for c in cats:
        v = frame[f"{c}_ns"].to_numpy() / MS
        color = CATEGORY_COLORS[c]
        label = c.replace("_", " ")
        if bars:
            ax.bar(x, v, bottom=bottom, color=color, label=label, width=0.85, linewidth=0)
        else:
            ax.fill_between(x, bottom, bottom + v, color=color, label=label, step="mid", lw=0)
        bottom = bottom + v


def render(data: ReportData) -> str | NoData:
    from stallscope.analysis import STALL_CATEGORIES
    from stallscope.report._plot import integer_ticks, pyplot, svg

    table = data.stall_table
    if table is None or table.height == 0:
        return NoData("the run has no steps (no step markers)")
    table = table.drop_nulls("step").sort("rank", "step")
    cats = [c for c in STALL_CATEGORIES if int(table[f"{c}_ns"].sum() or 0) > 0]
    plt = pyplot()
    ranks = table["rank"].unique().sort().to_list()
    steps = table["step"].n_unique()
    bars = steps <= MAX_BARS
    if len(ranks) <= MAX_RANK_ROWS:
        fig, axes = plt.subplots(
            len(ranks), 1, figsize=(10, 1.2 + 1.5 * len(ranks)), sharex=True, squeeze=False
        )
        for ax, r in zip(axes[:, 0], ranks, strict=True):
            rows = table.filter(pl.col("rank") == r)
            _stack(ax, rows["step"].to_numpy(), rows, cats, bars)
            ax.set_ylabel(f"rank {r}\nms")
        axes[-1, 0].set_xlabel("step")
        axes[-1, 0].xaxis.set_major_locator(integer_ticks())
        caption = "Each step's time per rank, stacked by stall category (ms)."
    else:
        slowest = (
            table.sort("step_ns", descending=True)
            .unique("step", keep="first", maintain_order=True)
            .sort("step")
        )
        per_rank = table.group_by("rank").agg(pl.col("^.*_ns$").mean()).sort("rank")
        fig, (a, b) = plt.subplots(2, 1, figsize=(10, 6.5))
        _stack(a, slowest["step"].to_numpy(), slowest, cats, bars)
        a.set_xlabel("step")
        a.set_ylabel("slowest rank, ms")
        _stack(b, per_rank["rank"].to_numpy(), per_rank, cats, True)
        b.set_xlabel("rank")
        a.xaxis.set_major_locator(integer_ticks())
        b.xaxis.set_major_locator(integer_ticks())
        b.set_ylabel("mean step, ms")
        caption = (
            f"{len(ranks)} ranks: above, each step's slowest rank; below, each rank's mean step, "
            "stacked by stall category (ms)."
        )
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(cats), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return figure(svg(fig, "stalls"), caption)


SECTION = Section("stalls", "Stalls per step and rank", render)
