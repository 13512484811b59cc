"""Checks of a system file's figures (``_cluster``): each a number in its range, so that a typo
names the key and the fix instead of failing deep inside a prediction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from stallscope.plan._errors import PlanError, listed

#: Figures that must be above zero: the node's size and links, the GPU's bandwidths, sizes and
#: efficiencies, an anchored system's compute factor.
POSITIVE: Final = (
    "gpus_per_node",
    "intra_node_GBps",
    "inter_node_Gbps",
    "compute_factor",
    "hbm_GBps",
    "hbm_GB",
    "matmul_fraction",
    "intra_node_fraction",
    "intra_node_copy_fraction",
    "inter_node_fraction",
)
#: Figures that may be zero: the SM count (0: unknown) and latencies.
NON_NEGATIVE: Final = ("sms", "intra_node_latency_us", "inter_node_latency_us")


def check_figures(doc: Mapping[str, Any], where: str) -> None:
    """PlanError naming the first figure of a system file that is not a number in range: peaks
    (one, or per precision) and the other node, device and link figures."""

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    peak = doc.get("peak_tflops")
    example = '"peak_tflops": {"bf16": 989.5} (dense TFLOP/s per precision) or one number for bf16'
    if isinstance(peak, Mapping):
        from stallscope.predict import PRECISIONS

        for prec, v in peak.items():
            if prec not in PRECISIONS:
                raise PlanError(
                    f"{where}: peak_tflops has an unknown precision {prec!r}: use "
                    f"{listed(PRECISIONS)}"
                )
            if not number(v) or v <= 0:
                raise PlanError(
                    f"{where}: peak_tflops[{prec!r}] must be a positive number, got {v!r}: "
                    f"{example}"
                )
    elif peak is not None and (not number(peak) or peak <= 0):
        raise PlanError(f"{where}: peak_tflops must be a positive number, got {peak!r}: {example}")
    for k in (*POSITIVE, *NON_NEGATIVE):
        if k in doc and (not number(doc[k]) or doc[k] < 0 or (doc[k] == 0 and k in POSITIVE)):
            what = "a positive number" if k in POSITIVE else "a number >= 0"
            raise PlanError(f"{where}: {k} must be {what}, got {doc[k]!r}")
