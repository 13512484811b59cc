"""The run in a sentence: ranks, steps, the typical step, where its time went, how the steps were
found."""

from __future__ import annotations

from typing import cast

import polars as pl

from stallscope.report._data import ReportData, slowest_step
from stallscope.report._style import ms, pct

_COMM = ("sync_wait", "network", "interconnect")
_DATA = ("data_fetch", "data_prep", "data")


def shares(table: pl.DataFrame) -> dict[str, float]:
    """Each stall category's share of all steps' time (0 when the steps have none)."""
    from stallscope.analysis import STALL_CATEGORIES

    total = float(table["step_ns"].sum() or 0)
    return {
        c: (float(table[f"{c}_ns"].sum() or 0) / total if total else 0.0) for c in STALL_CATEGORIES
    }


def summary_sentence(data: ReportData) -> str:
    run = data.run
    table = data.stall_table
    if table is None or table.height == 0:
        found = f" Steps: {run.steps_found[0]}." if run.steps_found else ""
        return (
            f"{run.events:,} events and no steps: nothing to divide into stalls (mark steps with "
            f"stallscope.step(), or profile the program with `stallscope profile`).{found}"
        )
    ranks = table["rank"].n_unique()
    steps = table["step"].n_unique()
    per_step = table.group_by("step").agg(pl.col("step_ns").max())
    slow = slowest_step(table)
    slow_row = (
        table.filter(pl.col("step") == slow).sort("step_ns", descending=True).row(0, named=True)
    )
    s = shares(table)
    comm = sum(s[c] for c in _COMM)
    data_share = sum(s[c] for c in _DATA)
    split = ", ".join(f"{c.replace('_', ' ')} {pct(s[c])}" for c in _COMM if s[c] > 0)
    of = f" (of {run.world_size})" if run.world_size and run.world_size != ranks else ""
    sentence = (
        f"{ranks} rank{'s' if ranks != 1 else ''}{of} ran {steps} step{'s' if steps != 1 else ''}"
        f" of {ms(cast(float, per_step['step_ns'].median() or 0))} (median over steps of the slowest "
        f"rank; step {slow} was the slowest, {ms(slow_row['step_ns'])} on rank "
        f"{slow_row['rank']}). Their time went to compute {pct(s['compute'])}"
        + (f", memcpy {pct(s['memcpy'])}" if s["memcpy"] > 0 else "")
        + f", communication {pct(comm)}"
        + (f" ({split})" if split else "")
        + f", data {pct(data_share)} and host {pct(s['host'])}."
    )
    if run.steps_found:
        sentence += f" Steps {run.steps_found[0].removeprefix('found ')}."
    return sentence
