"""The demo's look ahead, each step present only when this stallscope has its tool: the step time
predicted on 4 and 8 nodes (stallscope.predict: profile_of and sweep), and the cloud
configuration recommended for a long run of the job (stallscope.recommend.recommendation)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

PREDICT_NODES = (4, 8)
JOB_STEPS = 100_000  # the long run a recommendation is asked for
TIME_BUDGET = "24h"
# The demo trains on CPU threads: the GPU whose compute its times stand for when the
# recommender prices GPUs (its worked example in docs/usage.md uses the same).
MEASURED_DEVICE = "T4"


@contextmanager
def _noted(notes: list[str]) -> Iterator[None]:
    """Collect the warnings a tool raises as notes for the demo to print its way."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        text = str(w.message)
        if text not in notes:
            notes.append(text)


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
    notes: list[str] = field(default_factory=list)  # the tool's warnings


def predict(run_dir: Path, ranks_per_node: int, rate_bps: float | None) -> Outlook:
    """The step time on PREDICT_NODES nodes of `ranks_per_node` ranks at `rate_bps` (None: the
    predictor's default link)."""
    sp = predictor()
    if sp is None:
        return Outlook(error="stallscope.predict cannot profile runs here")
    notes: list[str] = []
    try:
        with _noted(notes):
            frame = sp.sweep(
                sp.profile_of(run_dir),
                nodes=PREDICT_NODES,
                ranks_per_node=(ranks_per_node,),
                rates_bps=(rate_bps,),
            )
    except Exception as e:  # the demo goes on; the reason is shown
        return Outlook(error=f"{type(e).__name__}: {e}", notes=notes)
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
    return Outlook(frame, lines, notes=notes)


def recommend(run_dir: Path) -> Outlook:
    """The configuration recommended to run JOB_STEPS steps of the job within TIME_BUDGET, and
    the Pareto front of time against cost."""
    rec = recommender()
    if rec is None:
        return Outlook(error="stallscope.recommend cannot recommend here")
    notes: list[str] = []
    ask: dict[str, object] = {"steps": JOB_STEPS, "time_budget": TIME_BUDGET}
    ask["measured_device"] = MEASURED_DEVICE
    try:
        with _noted(notes):
            call: Callable[..., object] = getattr(rec, "recommendation", None) or rec.recommend
            got = call(run_dir, **ask)
        if isinstance(got, pl.DataFrame):  # recommend(): the candidates, best first
            best, why, front = got.row(0, named=True), "", None
        else:
            best, why, front = got.best, got.why, got.pareto  # type: ignore[attr-defined]
    except Exception as e:  # the demo goes on; the reason is shown
        return Outlook(error=f"{type(e).__name__}: {e}", notes=notes)
    lines = [
        f"{JOB_STEPS:,} steps within {TIME_BUDGET} (the demo's CPU compute standing for a "
        f"{MEASURED_DEVICE}'s): {best.get('config', best)}"
    ]
    if why:
        lines.append(str(why))
    return Outlook(front, lines, notes=notes)
