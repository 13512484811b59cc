"""The central steps of a run and its summary as one step.

A measured run is summarised by its *central steps*: the middle half of its kept steps ranked by
step time (per step the mean over ranks), the interquartile mean. Like the median it ignores a
hiccup step and the slow tail of a loaded machine; unlike per-column medians it is additive:
every figure (the step, each stall column, each phase's compute, the data wait) is a mean over
the same rank-steps, so the columns sum to the step and the profile's parts compose to the
measured step. Runs of 1 to 3 kept steps use every step.

How noisy the run was, over every kept step: the spread of the per-step times (their
interquartile range) and the skew of the ranks' windows within a step (per step the longest
rank's step time less the shortest's, averaged over steps). Each rank marks its own steps; on a
loaded machine a rank descheduled at the end of one step starts the next later, and the waits
move between ranks and steps in a way no model of aligned steps reproduces. Both over the
median step are the profile's ``noise``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import numpy as np
import polars as pl

from stallscope.analysis import STALL_COLUMNS

#: Steps at most this many are all central (a middle half of 1 to 3 steps is not a sample).
ALL_CENTRAL_BELOW: Final = 4
#: A run noisier than this (step spread plus rank skew, over the median) says so in its notes.
NOISY_SPREAD: Final = 0.05


def mean(xs: Iterable[float]) -> float:
    """The mean (0.0 of nothing)."""
    a = np.fromiter(xs, dtype=float)
    return float(a.mean()) if a.size else 0.0


def median(xs: Iterable[float]) -> float:
    """The median (0.0 of nothing)."""
    a = np.fromiter(xs, dtype=float)
    return float(np.median(a)) if a.size else 0.0


def iqr(xs: Iterable[float]) -> float:
    """The interquartile range (0.0 below 2 values)."""
    a = np.fromiter(xs, dtype=float)
    if a.size < 2:
        return 0.0
    q1, q3 = np.percentile(a, [25, 75])
    return float(q3 - q1)


def per_step(table: pl.DataFrame) -> pl.DataFrame:
    """step, step_ns and the stall columns: per step the mean over its ranks, by step."""
    cols = ["step_ns", *STALL_COLUMNS]
    return table.group_by("step").agg(pl.col(c).cast(pl.Float64).mean() for c in cols).sort("step")


def central_steps(table: pl.DataFrame) -> set[int]:
    """The steps of a stall table (kept steps only) whose mean step time over ranks lies in the
    middle half: of n steps ranked by time, the n // 4 fastest and slowest are left out (ties
    by step number); every step below ALL_CENTRAL_BELOW steps."""
    if table.height == 0:
        return set()
    steps = per_step(table).sort("step_ns", "step")
    n = steps.height
    cut = 0 if n < ALL_CENTRAL_BELOW else n // 4
    return {int(s) for s in steps["step"][cut : n - cut].to_list()}


def table_summary(table: pl.DataFrame) -> dict[str, float]:
    """A stall table's step and columns as one step (ns): the means over the rank-steps of the
    central steps (the columns sum to the step), plus ``step_median_ns`` (the median over steps
    of the mean over ranks), ``step_spread_ns`` (their interquartile range) and
    ``rank_skew_ns`` (per step the longest rank's time less the shortest's, mean over steps)."""
    cols = ["step_ns", *STALL_COLUMNS]
    if table.height == 0:
        return dict.fromkeys([*cols, "step_median_ns", "step_spread_ns", "rank_skew_ns"], 0.0)
    keep = central_steps(table)
    mid = table.filter(pl.col("step").is_in(sorted(keep)))
    out = {c: float(mid[c].cast(pl.Float64).mean()) for c in cols}  # type: ignore[arg-type]
    times = per_step(table)["step_ns"].to_list()
    out["step_median_ns"] = median(times)
    out["step_spread_ns"] = iqr(times)
    skew = table.group_by("step").agg(d=pl.col("step_ns").max() - pl.col("step_ns").min())
    out["rank_skew_ns"] = float(skew["d"].cast(pl.Float64).mean())  # type: ignore[arg-type]
    return out
