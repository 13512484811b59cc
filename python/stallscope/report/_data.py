"""What a report shows: Polars frames, one per kind of result, each optional. A section renders
when the frames it needs are given; `report_data` fills them from a run's events with the
analysis functions (frames in, frames out), and callers add the frames of other tools (the
predictor's, the recommender's)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from stallscope.exceptions import ReportError


@dataclass
class RunFacts:
    """What the page says about the run itself."""

    path: str = ""
    source: str = "native"  # "native" run directory, "kineto" profiler traces
    events: int = 0
    world_size: int | None = None
    coverage: str | None = None  # "1 of 16 ranks' traces (rank 0)"
    steps_found: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings raised while loading


@dataclass
class ReportData:
    """The frames of a report (None: not available; the section says so).

    - ``stall_table``: analysis.stall_table (rank, step, start_ns, end_ns, step_ns, category
      columns).
    - ``intervals``: analysis.stall_intervals of the slowest step (rank, step, category,
      start_ns, end_ns).
    - ``collectives``: analysis.match_collectives (rank, name, bytes, start_ns, end_ns,
      sync_wait_ns, transfer_ns, group_size, nnodes, ...).
    - ``calibration``: the fits of a calibration file (stallscope.comm.Calibration.fits:
      collective, tier, group_size, alpha_s, beta_s_per_byte, ...).
    - ``stragglers``: analysis.stragglers (step, rank, late_ns, caused_wait_ns, straggler, ...).
    - ``hta``: HTA's views by function name (temporal_breakdown, idle_time_breakdown,
      kernel_type_breakdown, comm_comp_overlap) for GPU traces.
    - ``prediction``: predicted configurations, a row each (stallscope.predict.predict's frame:
      nodes, ranks_per_node, step_ns, the stall columns, ...); ``comparison``: prediction
      against measurement per column (stallscope.predict.compare's frame: column, predicted_ns,
      measured_ns, error_ns, error_pct).
    - ``pareto``: a recommendation's Pareto front (stallscope.recommend's
      Recommendation.pareto: config, market, cloud, hours, cost, ...).
    """

    run: RunFacts = field(default_factory=RunFacts)
    stall_table: pl.DataFrame | None = None
    intervals: pl.DataFrame | None = None
    collectives: pl.DataFrame | None = None
    calibration: pl.DataFrame | None = None
    stragglers: pl.DataFrame | None = None
    hta: dict[str, pl.DataFrame] | None = None
    prediction: pl.DataFrame | None = None
    comparison: pl.DataFrame | None = None
    pareto: pl.DataFrame | None = None


def slowest_step(table: pl.DataFrame) -> int | None:
    """The step whose slowest rank took longest (None without steps)."""
    if table.height == 0 or table["step"].null_count() == table.height:
        return None
    per = table.drop_nulls("step").group_by("step").agg(pl.col("step_ns").max()).sort("step")
    return int(per.sort("step_ns", descending=True, maintain_order=True)["step"][0])


def calibration_fits(calibration: str | os.PathLike[str] | Any) -> pl.DataFrame:
    """The fits of a calibration (a file written by `stallscope bench comm --calibrate`, or a
    stallscope.comm.Calibration). ReportError naming the file when it cannot be read."""
    from stallscope.comm import Calibration

    if isinstance(calibration, Calibration):
        return calibration.fits
    try:
        return Calibration.load(Path(calibration)).fits
    except ValueError as e:
        raise ReportError(str(e)) from None


def report_data(
    events: pl.DataFrame,
    run: RunFacts | None = None,
    *,
    calibration: str | os.PathLike[str] | Any | None = None,
    hta: bool | None = None,
) -> ReportData:
    """The frames of a report on `events` (stallscope.load / import_kineto's frame). `hta`:
    compute HTA's views (None: when the run holds GPU kernels)."""
    from stallscope.analysis import match_collectives, stall_intervals, stall_table, stragglers

    fits = calibration_fits(calibration) if calibration is not None else None
    table = stall_table(events)
    data = ReportData(run=run or RunFacts(events=events.height), stall_table=table)
    data.calibration = fits
    step = slowest_step(table)
    if step is not None:
        data.intervals = stall_intervals(events).filter(pl.col("step") == step)
    comm = match_collectives(events)
    if comm.height:
        data.collectives = comm
        data.stragglers = stragglers(events, matched=comm)
    gpu = events.height > 0 and bool(events["kind"].cast(pl.String).is_in(["kernel"]).any())
    if hta if hta is not None else gpu:
        from stallscope.analysis import (
            comm_comp_overlap,
            idle_time_breakdown,
            kernel_type_breakdown,
            temporal_breakdown,
        )

        views = (temporal_breakdown, comm_comp_overlap, idle_time_breakdown, kernel_type_breakdown)
        data.hta = {f.__name__: f(events) for f in views}
    return data
