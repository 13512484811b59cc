"""Anchor the planner on one measured step of the user's own job.

The device model times GEMMs and attention at the rates its tables give (kernels measured in
short bursts with recent libraries). A job's own software, clocks and kernels run at some
other rate, which a single measured step reveals: ``anchor`` finds the factor on the GEMM and
attention rates (``DeviceModel.compute_factor``) at which the configuration's predicted step
equals the measured one. Everything else keeps its model: memory-bound kernels, communication,
the pipeline schedule. The anchored system then predicts the job's other configurations
(``plan``, ``whatif``, ``predict``), saved as a system file with ``compute_factor`` set. The
measured step is a number of seconds or a measured run (a stallscope run directory, PyTorch
profiler traces or a saved profile: ``stallscope.predict.profile_of``), whose median step after
warm-up it takes.

The step falls as the factor grows, so a bracketed root search over log(factor) finds it. A
measured step that no factor in [1/20, 20] reaches means the configuration or the system is not
the one that ran (its communication alone takes longer, or the GPUs would have to be 20x
slower), and says so.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from stallscope.plan._cluster import Cluster, anchored
from stallscope.plan._errors import PlanError
from stallscope.plan._predict import Prediction, predict_strategy

#: The factors searched: a measured step outside their reach is refused.
FACTOR_RANGE: Final = (1 / 20, 20.0)
#: The anchored step's relative distance from the measured one at which the search stops.
TOLERANCE: Final = 1e-5


@dataclass(frozen=True)
class Anchor:
    """A configuration's measured step and the compute factor that reproduces it."""

    factor: float  # GEMM and attention rate over the device model's: the compute_factor found
    measured_step_s: float
    blind: Prediction  # the prediction before anchoring
    prediction: Prediction  # the same configuration on the anchored system
    measured_from: str = ""  # where the measured step came from ("" for a number given)

    @property
    def system(self) -> Cluster:
        """The anchored system: plan and predict other configurations on it."""
        return self.prediction.system

    @property
    def blind_error(self) -> float:
        """The blind prediction's error against the measured step (negative: too short)."""
        return self.blind.step_ns * 1e-9 / self.measured_step_s - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "compute_factor": self.factor,
            "measured_step_s": self.measured_step_s,
            "blind_step_s": self.blind.step_ns * 1e-9,
            "anchored_step_s": self.prediction.step_ns * 1e-9,
            "config": self.prediction.strategy.label(),
            "measured_from": self.measured_from,
        }

    def system_doc(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """``base`` (a system file's keys) with the anchor's ``compute_factor`` and what it was
        found on (``anchored_on``): a system file for ``--system``."""
        s = self.prediction.strategy
        return {
            **{k: v for k, v in base.items() if k not in ("compute_factor", "anchored_on")},
            "compute_factor": round(self.factor, 5),
            "anchored_on": {
                "model": self.prediction.model.name,
                "config": s.label(),
                "gpus": s.gpus,
                "global_batch": s.global_batch,
                "measured_step_s": self.measured_step_s,
                **({"measured_from": self.measured_from} if self.measured_from else {}),
                "blind_step_s": round(self.blind.step_ns * 1e-9, 6),
                "date": datetime.date.today().isoformat(),
            },
        }


def _step_s(p: Prediction, factor: float) -> tuple[float, Prediction]:
    system = replace(p.system, device=anchored(p.system.device, factor))
    q = predict_strategy(p.model, system, p.strategy)
    return q.step_ns * 1e-9, q


MeasuredStep = float | str | os.PathLike[str]


def measured_step(source: MeasuredStep) -> tuple[float, str, int]:
    """(seconds, where from, the run's ranks) of a measured step: a number of seconds as given
    (ranks 0: not known), or the median step after warm-up of a measured run (a run directory,
    PyTorch profiler traces, a saved profile; ``stallscope.predict.profile_of``)."""
    if isinstance(source, bool):
        raise PlanError(f"measured step {source!r}: give the step time in seconds")
    if isinstance(source, (int, float)):
        return float(source), "", 0
    if isinstance(source, str):
        try:
            return float(source), "", 0
        except ValueError:
            pass
    from stallscope.predict import PredictError, profile_of

    path = Path(source)
    if not path.exists():
        raise PlanError(
            f"measured step {str(source)!r}: neither a number of seconds nor a measured run "
            "(a run directory, PyTorch profiler traces or a saved profile)"
        )
    try:
        m = profile_of(path).measured
    except PredictError as e:
        raise PlanError(f"measured step from {path}: {e}") from None
    ns = m.step_median_ns or m.step_ns
    ranks = f", {m.ranks} rank{'s' if m.ranks != 1 else ''}" if m.ranks else ""
    where = f"the median step of {path} ({m.device or 'device not recorded'}{ranks})"
    return ns * 1e-9, where, int(m.ranks or 0)


def anchor(prediction: Prediction, measured_step_s: MeasuredStep) -> Anchor:
    """The compute factor at which ``prediction``'s configuration takes ``measured_step_s``
    (a measured step of that configuration on that system: seconds, or a measured run whose
    median step it takes), and the anchored prediction."""
    measured_step_s, measured_from, ranks = measured_step(measured_step_s)
    gpus = prediction.strategy.gpus
    if ranks and ranks != gpus:
        raise PlanError(
            f"{measured_from} ran on {ranks} ranks and {prediction.strategy.label()} on {gpus} "
            "GPUs: anchor on the configuration that ran (predict it as it ran, with "
            "--measured-step and --save-system), then plan the others on the saved system"
        )
    if not math.isfinite(measured_step_s):
        raise PlanError(f"measured step {measured_step_s!r}: give the step time in seconds")
    if measured_step_s <= 0:
        raise PlanError(f"measured step {measured_step_s} s: a step time must be > 0 seconds")
    base = prediction.system.device.compute_factor
    lo, hi = base * FACTOR_RANGE[0], base * FACTOR_RANGE[1]
    t_hi, q_hi = _step_s(prediction, hi)
    label = prediction.strategy.label()
    if t_hi > measured_step_s:
        raise PlanError(
            f"the measured {measured_step_s:.4g} s is shorter than {label} takes on "
            f"{prediction.system.name} even with GEMMs and attention {FACTOR_RANGE[1]:.0f}x "
            f"faster ({t_hi:.4g} s: its communication, memory-bound kernels and pipeline "
            "bubble alone): check the configuration (split, batch, overlaps, stack) and the "
            "system's links against the run that was measured"
        )
    t_lo, _ = _step_s(prediction, lo)
    if t_lo < measured_step_s:
        raise PlanError(
            f"the measured {measured_step_s:.4g} s is longer than {label} takes on "
            f"{prediction.system.name} even with GEMMs and attention {FACTOR_RANGE[1]:.0f}x "
            f"slower ({t_lo:.4g} s): check the measured time (seconds per optimizer step), "
            "the configuration and the GPU"
        )
    # Illinois regula falsi on log(step / measured) over log(factor): bracketed, so it cannot
    # leave [lo, hi]; a handful of predictions where bisection takes about twenty
    a, fa = math.log(lo), math.log(t_lo / measured_step_s)  # > 0: too slow at lo
    b, fb = math.log(hi), math.log(t_hi / measured_step_s)  # <= 0
    best = q_hi
    for _ in range(64):  # bounded; converges in well under ten steps on the public runs
        if abs(fb) <= TOLERANCE or b == a:
            break
        x = b - fb * (b - a) / (fb - fa)
        t, q = _step_s(prediction, math.exp(x))
        fx = math.log(t / measured_step_s)
        if fx * fb < 0:
            a, fa = b, fb
        else:
            fa /= 2
        b, fb, best = x, fx, q
    return Anchor(
        factor=math.exp(b),
        measured_step_s=float(measured_step_s),
        blind=prediction,
        prediction=best,
        measured_from=measured_from,
    )
