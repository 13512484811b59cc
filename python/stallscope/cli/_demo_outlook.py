"""The demo's look ahead, each step present only when this stallscope has its tool: the step time
predicted on 4 and 8 nodes (stallscope.predict: profile_of and sweep), and the cloud
configuration recommended for a long run of the job (stallscope.recommend.recommendation)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

PREDICT_NODES = (4, 8)
JOB_STEPS = 100_000  # the long run a recommendation is asked for
TIME_BUDGET = "24h"


def predictor() -> Any | None:
    """stallscope.predict when it can profile a run and sweep configurations, else None."""
    try:
        sp = importlib.import_module("stallscope.predict")
    except ImportError:
        return None
    return sp if hasattr(sp, "profile_of") and hasattr(sp, "sweep") else None


def recommender() -> Any | None:
    """stallscope.recommend when it can recommend for a run, else None."""
    try:
        rec = importlib.import_module("stallscope.recommend")
    except ImportError:
        return None
    return rec if hasattr(rec, "recommendation") or hasattr(rec, "recommend") else None


@dataclass
class Outlook:
    """What a look-ahead step gave: a frame for the report, lines to print, or why it failed."""

    frame: pl.DataFrame | None = None
    lines: list[str] = field(default_factory=list)
    error: str | None = None


def predict(run_dir: Path, ranks_per_node: int, rate_bps: float | None) -> Outlook:
    """The step time on PREDICT_NODES nodes of `ranks_per_node` ranks at `rate_bps` (None: the
    predictor's default link)."""
    sp = predictor()
    if sp is None:
        return Outlook(error="stallscope.predict cannot profile runs here")
    try:
        frame = sp.sweep(
            sp.profile_of(run_dir),
            nodes=PREDICT_NODES,
            ranks_per_node=(ranks_per_node,),
            rates_bps=(rate_bps,),
        )
    except Exception as e:  # the demo goes on; the reason is shown
        return Outlook(error=f"{type(e).__name__}: {e}")
    lines = []
    for row in frame.iter_rows(named=True):
        step = float(row.get("step_ns") or 0)
        comm = sum(
            float(row.get(c) or 0) for c in ("sync_wait_ns", "network_ns", "interconnect_ns")
        )
        speed = row.get("speedup")
        lines.append(
            f"{row.get('nodes')} nodes x {row.get('ranks_per_node')} rank(s): step "
            f"{step / 1e6:,.1f} ms, communication {100 * comm / step if step else 0:.0f}%"
            + (f", throughput x{float(speed):.2f} of the measured run" if speed else "")
        )
    return Outlook(frame, lines)


def recommend(run_dir: Path) -> Outlook:
    """The configuration recommended to run JOB_STEPS steps of the job within TIME_BUDGET, and
    the Pareto front of time against cost."""
    rec = recommender()
    if rec is None:
        return Outlook(error="stallscope.recommend cannot recommend here")
    try:
        if hasattr(rec, "recommendation"):
            r = rec.recommendation(
                run_dir, steps=JOB_STEPS, time_budget=TIME_BUDGET, measured_device="A100"
            )
            best, why, front = r.best, r.why, r.pareto
        else:
            cands = rec.recommend(run_dir, steps=JOB_STEPS, time_budget=TIME_BUDGET)
            best, why, front = cands.row(0, named=True), "", None
    except Exception as e:  # the demo goes on; the reason is shown
        return Outlook(error=f"{type(e).__name__}: {e}")
    lines = [f"{JOB_STEPS:,} steps within {TIME_BUDGET}: {best.get('config', best)}"]
    if why:
        lines.append(str(why))
    return Outlook(front, lines)
