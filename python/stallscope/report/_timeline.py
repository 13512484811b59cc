"""The slowest step, rank by rank: what each instant went to (analysis.stall_intervals), on one
time axis (ms from the step's first start on any rank), with the command for the full trace."""

from __future__ import annotations

from typing import cast

import polars as pl

from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, esc, figure
from stallscope.report._style import CATEGORY_COLORS, MS, ms

MAX_RANKS = 32  # lanes drawn; more ranks: the slowest ones


def render(data: ReportData) -> str | NoData:
    from stallscope.analysis import STALL_CATEGORIES
    from stallscope.report._plot import pyplot, svg

    iv = data.intervals
    if iv is None or iv.height == 0 or data.stall_table is None:
        if data.stall_table is not None and data.stall_table.height:
            return NoData("no step intervals were given (they come from the run's events)")
        return NoData("the run has no steps (no step markers)")
    step = int(iv["step"][0])
    rows = data.stall_table.filter(pl.col("step") == step).sort("step_ns", descending=True)
    ranks = sorted(rows["rank"].head(MAX_RANKS).to_list())
    t0 = cast(int, iv["start_ns"].min() or 0)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.42 * len(ranks)))
    for c in STALL_CATEGORIES:
        part = iv.filter(pl.col("category") == c)
        if part.height == 0:
            continue
        for y, r in enumerate(ranks):
            mine = part.filter(pl.col("rank") == r)
            if mine.height:
                spans = list(
                    zip(
                        ((mine["start_ns"] - t0) / MS).to_list(),
                        ((mine["end_ns"] - mine["start_ns"]) / MS).to_list(),
                        strict=True,
                    )
                )
                ax.broken_barh(spans, (y - 0.38, 0.76), color=CATEGORY_COLORS[c], lw=0)
        ax.bar(0, 0, color=CATEGORY_COLORS[c], label=c.replace("_", " "))  # legend entry
    ax.set_yticks(range(len(ranks)), [f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel(f"ms from the start of step {step}")
    ax.grid(axis="y", visible=False)
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 1.0 + 0.9 / (1 + len(ranks))),
        ncol=9,
        frameon=False,
    )
    slowest = rows.row(0, named=True)
    shown = "" if rows.height <= MAX_RANKS else f" (the {MAX_RANKS} slowest of {rows.height})"
    cmd = f"stallscope export {data.run.path or 'RUN'} --perfetto trace.json.gz"
    return (
        f'<p class="lead">Step {step} took longest: {esc(ms(slowest["step_ns"]))} on rank '
        f"{slowest['rank']}. Each bar is one rank{esc(shown)}; colour is what that instant went "
        "to.</p>"
        + figure(svg(fig, "timeline"), f"Step {step}, ranks on one clock.")
        + f'<p>The whole run with every event: <span class="cmd">{esc(cmd)}</span>, then open '
        "the file in ui.perfetto.dev (a stalls track per rank).</p>"
    )


SECTION = Section("timeline", "The slowest step, rank by rank", render)
