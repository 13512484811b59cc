"""Communication micro-benchmarks (nccl-tests semantics over torch.distributed) and their alpha-beta
calibration. torch is imported only when a benchmark runs.

    from stallscope.comm import SweepConfig, launch_local, results_frame
    report = launch_local(SweepConfig(collectives=("all_reduce",), max_bytes=1 << 20), nprocs=2)
    frame = results_frame(report)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stallscope.comm._calibration import (
    CALIBRATION_FORMAT,
    MIN_FIT_BYTES,
    Calibration,
    LinearFit,
    fit_frame,
    fit_linear,
    results_frame,
    write_calibration,
)
from stallscope.comm._formulas import (
    COLLECTIVES,
    algbw,
    bus_factor,
    busbw,
    cost_terms,
    hierarchical_all_reduce_seconds,
    hierarchical_seconds,
    predict_seconds,
    shared_beta,
    tcp_efficiency,
)
from stallscope.comm._harness import TIERS, SweepConfig, parse_size, sweep_sizes
from stallscope.comm._launch import launch_local

if TYPE_CHECKING:
    from stallscope.comm._worker import run_worker

__all__ = [
    "CALIBRATION_FORMAT",
    "COLLECTIVES",
    "MIN_FIT_BYTES",
    "TIERS",
    "Calibration",
    "LinearFit",
    "SweepConfig",
    "algbw",
    "bus_factor",
    "busbw",
    "cost_terms",
    "fit_frame",
    "fit_linear",
    "hierarchical_all_reduce_seconds",
    "hierarchical_seconds",
    "launch_local",
    "parse_size",
    "predict_seconds",
    "results_frame",
    "run_worker",
    "shared_beta",
    "sweep_sizes",
    "tcp_efficiency",
    "write_calibration",
]


def __getattr__(name: str) -> Any:
    # run_worker is imported on first use: the launcher runs `python -m stallscope.comm._worker`,
    # and a package that imported _worker already makes runpy warn in every worker.
    if name == "run_worker":
        from stallscope.comm._worker import run_worker

        return run_worker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
