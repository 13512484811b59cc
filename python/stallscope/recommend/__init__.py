"""Cloud configurations for a measured training job: the instance catalog (GPU instances with
their prices, each with its source and date), spot interruption rates, and the recommender.

    from stallscope.recommend import recommendation
    rec = recommendation("runs/job", steps=100_000, time_budget="24h")
    rec.best, rec.why          # the cheapest configuration that finishes in 24 h, and why
    rec.pareto                 # hours against cost: the configurations nothing beats on both

A model never run is planned instead (``PlanPredictor``: each configuration in the fastest
parallel layout that fits, by ``stallscope.plan``):

    from stallscope.recommend import PlanPredictor
    rec = recommendation(PlanPredictor("llama3-70b", global_batch=512, precision="fp8"),
                         tokens=1e12, time_budget="60d", max_instances=32)

`recommend(...)` returns `recommendation(...).candidates`, the frame of every configuration.
The package itself is callable as that function: `stallscope.recommend(run, steps=...,
time_budget=...)` is `stallscope.recommend.recommend(...)`, so the name stays the package (no
top-level function shadows it). docs/recommend.md has the method and its limits.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from stallscope.recommend._catalog import (
    CATALOG_COLUMNS,
    filter_catalog,
    load_catalog,
    shipped_catalog_path,
)
from stallscope.recommend._errors import NoCandidateError, RecommendError
from stallscope.recommend._gpu_lookup import gpu_device
from stallscope.recommend._interruptions import INTERRUPTION_COLUMNS, load_spot_interruptions
from stallscope.recommend._job import Job, Work
from stallscope.recommend._plan_predictor import PlanPredictor
from stallscope.recommend._predictor_seam import Shape, StepPredictor
from stallscope.recommend._recommend import (
    PARETO_COLUMNS,
    Recommendation,
    recommend,
    recommendation,
)
from stallscope.recommend._spot import SpotModel

__all__ = [
    "CATALOG_COLUMNS",
    "INTERRUPTION_COLUMNS",
    "PARETO_COLUMNS",
    "Job",
    "NoCandidateError",
    "PlanPredictor",
    "RecommendError",
    "Recommendation",
    "Shape",
    "SpotModel",
    "StepPredictor",
    "Work",
    "filter_catalog",
    "gpu_device",
    "load_catalog",
    "load_spot_interruptions",
    "recommend",
    "recommendation",
    "shipped_catalog_path",
]


class _CallablePackage(types.ModuleType):
    """This package, callable as `recommend` (the frame of every configuration)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return recommend(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
