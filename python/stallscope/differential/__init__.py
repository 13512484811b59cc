"""The differential stall method (DS-Analyzer, extended by Stash): run the same training job
several ways and subtract. prep = T(cached) - T(synthetic), fetch = T(cold) - T(cached),
interconnect = T(G devices in one node) - T(1 device), network = T(G devices over N nodes) -
T(G devices in one node). Every run is traced, so the trace-based stall table of the same runs
stands beside it. `stallscope analyze` is its command; docs/analyze.md describes it."""

from __future__ import annotations

from stallscope.differential._command import Entry, entry_of
from stallscope.differential._configs import PARTS, RunConfig, plan
from stallscope.differential._macro import POINT_COLUMNS, Fit, fit_layers_gradients
from stallscope.differential._measure import (
    SUMMARY_SCHEMA,
    TRIM,
    WARMUP,
    cache_marks,
    measured_steps,
    run_summary,
    samples_per_step,
    trimmed_steps,
)
from stallscope.differential._method import (
    GUARD_LIMIT,
    OTHERS_LIMIT,
    Result,
    Settings,
    analyze,
    result_json,
)
from stallscope.differential._overlap import allreduce_s, exposed_comm_ns
from stallscope.differential._stalls import DEFINITIONS, STALLS_SCHEMA, differential_stalls
from stallscope.differential._sweep import ModelPoint, backward_ns, bucket_sizes, sweep_comm

__all__ = [
    "DEFINITIONS",
    "GUARD_LIMIT",
    "OTHERS_LIMIT",
    "PARTS",
    "POINT_COLUMNS",
    "STALLS_SCHEMA",
    "SUMMARY_SCHEMA",
    "TRIM",
    "WARMUP",
    "Entry",
    "Fit",
    "ModelPoint",
    "Result",
    "RunConfig",
    "Settings",
    "allreduce_s",
    "analyze",
    "backward_ns",
    "bucket_sizes",
    "cache_marks",
    "differential_stalls",
    "entry_of",
    "exposed_comm_ns",
    "fit_layers_gradients",
    "measured_steps",
    "plan",
    "result_json",
    "run_summary",
    "samples_per_step",
    "sweep_comm",
    "trimmed_steps",
]
