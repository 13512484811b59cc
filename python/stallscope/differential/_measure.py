"""One traced run in figures: its step time and the trace-based stall table over the measured
steps (warm-up and the last window left out), the samples each rank processes per step, and
what was done to the page cache before it."""

from __future__ import annotations

from typing import Final

import polars as pl

from stallscope._schema import parse_detail
from stallscope.analysis import STALL_COLUMNS, stall_table
from stallscope.data._declare import CACHE_MARK
from stallscope.data._synthetic import SAMPLES_COUNTER
from stallscope.exceptions import AnalyzeError

#: Steps of each rank left out at the start of every run (start-up, first allocations, the
#: first DDP step that rebuilds its buckets).
WARMUP: Final = 3
#: Fraction of the measured steps left out at each end (fastest, slowest) of the mean.
TRIM: Final = 0.2

SUMMARY_SCHEMA: Final[dict[str, pl.DataType]] = {
    "ranks": pl.Int64(),
    "steps": pl.Int64(),
    "step_ns": pl.Float64(),
    "step_cv": pl.Float64(),
    "samples_per_step": pl.Float64(),
    **{c: pl.Float64() for c in STALL_COLUMNS},
}
"""run_summary's columns: ranks and measured steps; step_ns and the stall columns as means over
the (rank, step) rows of the measured steps' middle (trimmed_steps), ns; step_cv: the
coefficient of variation of the per-step mean over ranks, all measured steps (noise);
samples_per_step: samples per rank and step (median of the
``batch_samples`` counters; null when none were recorded)."""


def measured_steps(table: pl.DataFrame, warmup: int = WARMUP) -> pl.DataFrame:
    """The rows of a stall table that are measured: per rank, without its first `warmup` steps
    and without its last window (the one the end of the trace closes: teardown, or the tail
    after `stallscope.data.synthetic`'s closing step marker)."""
    if warmup < 0:
        raise AnalyzeError(f"warm-up must be >= 0 steps, got {warmup}")
    i = pl.int_range(pl.len()).over("rank")
    n = pl.len().over("rank")
    return table.sort("rank", "step").filter((i >= warmup) & (i < n - 1))


def samples_per_step(events: pl.DataFrame) -> float | None:
    """Samples per rank and step: the median of the ``batch_samples`` counters (recorded by
    stallscope.data.synthetic), None when the run has none."""
    c = events.filter((pl.col("kind") == "counter") & (pl.col("name") == SAMPLES_COUNTER))
    if c.height == 0:
        return None
    v = c["value"].median()
    return float(v) if isinstance(v, (int, float)) else None


def trimmed_steps(kept: pl.DataFrame, trim: float = TRIM) -> pl.DataFrame:
    """The rows of `kept` (measured_steps) whose step lies in the middle of the run: steps
    ranked by their mean time over ranks, the fastest and the slowest `trim` fraction each
    left out (a trimmed mean: a noisy neighbour's pause, or a checkpoint, moves it little)."""
    if not 0.0 <= trim < 0.5:
        raise AnalyzeError(f"trim must be in [0, 0.5), got {trim}")
    per_step = kept.group_by("step").agg(pl.col("step_ns").mean()).sort("step_ns", "step")
    n = per_step.height
    cut = int(n * trim)
    keep = per_step["step"][cut : n - cut] if n - 2 * cut >= 1 else per_step["step"]
    return kept.filter(pl.col("step").is_in(keep.implode()))


def run_summary(events: pl.DataFrame, warmup: int = WARMUP, trim: float = TRIM) -> pl.DataFrame:
    """One row (SUMMARY_SCHEMA) for a run's events (stallscope.load of its directory): the
    means over the measured steps' middle (trimmed_steps), so that the stall columns still sum
    to step_ns."""
    table = stall_table(events)
    if table.height == 0:
        raise AnalyzeError(
            "the run recorded no step markers: wrap the training loop's loader in "
            "stallscope.data.synthetic(loader), or call stallscope.step() at each step"
        )
    kept = measured_steps(table, warmup)
    if kept.height == 0:
        per_rank = int(table.group_by("rank").len()["len"].min() or 0)  # type: ignore[arg-type]
        raise AnalyzeError(
            f"the run has {per_rank} step window(s) per rank, none left after {warmup} warm-up "
            "step(s) and the last window: run more steps (--steps) or fewer warm-up steps"
        )
    per_step = kept.group_by("step").agg(pl.col("step_ns").mean())["step_ns"]
    mean = float(per_step.mean())  # type: ignore[arg-type]
    std = float(per_step.std() or 0.0) if per_step.len() > 1 else 0.0  # type: ignore[arg-type]
    mid = trimmed_steps(kept, trim)
    row = {
        "ranks": int(kept["rank"].n_unique()),
        "steps": int(kept["step"].n_unique()),
        "step_ns": float(mid["step_ns"].mean()),  # type: ignore[arg-type]
        "step_cv": std / mean if mean > 0 else 0.0,
        "samples_per_step": samples_per_step(events),
        **{c: float(mid[c].mean()) for c in STALL_COLUMNS},  # type: ignore[arg-type]
    }
    return pl.DataFrame([row], schema=SUMMARY_SCHEMA)


def cache_marks(events: pl.DataFrame) -> pl.DataFrame:
    """What each rank's stallscope.data.dataset_files did to the page cache: rank, mode,
    method, files, bytes, resident_before, resident_after (fractions; null when unmeasured)."""
    m = events.filter((pl.col("kind") == "mark") & (pl.col("name") == CACHE_MARK))
    d = pl.col("detail")
    return m.select(
        "rank",
        mode=parse_detail(d, "mode"),
        method=parse_detail(d, "method"),
        files=parse_detail(d, "files", pl.Int64()),
        bytes=parse_detail(d, "bytes", pl.Int64()),
        resident_before=parse_detail(d, "resident_before").replace("", None).cast(pl.Float64),
        resident_after=parse_detail(d, "resident_after").replace("", None).cast(pl.Float64),
    ).sort("rank")
