"""Heterogeneous configurations: two instance types in one data-parallel job (after Srift).

Each rank's share of the global batch is in proportion to its device's speed, so every rank
finishes its compute at the same time: with a fraction f_i of the ranks on a device whose
compute takes s_i times the measured one, the step's compute takes 1 / sum(f_i / s_i) times
the measured one. The gradients are all-reduced over every rank, so the step's communication
runs at the slowest of the two types' links. The predictor is then asked for that job: the
mix's nodes and ranks, its combined compute ratio and its slowest links.

Both types have the same GPUs per instance (every node then holds the same number of ranks,
as the predictor's configurations do), are in one cloud and region, and have a network
figure. Each type is used at most ``max_instances`` times, as in a homogeneous configuration.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import polars as pl

from stallscope.recommend._candidates import CONFIG_SCHEMA
from stallscope.recommend._job import Job, accumulation
from stallscope.recommend._predictor_seam import StepPredictor


def mix_label(parts: Sequence[tuple[str, int]]) -> str:
    """ "g6e.48xlarge x 3 + g5.48xlarge x 1"."""
    return " + ".join(f"{inst} x {n}" for inst, n in parts)


def pairs(types: pl.DataFrame) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of catalog rows that can share a job: same cloud, region and GPUs per instance,
    both with a network figure."""
    rows = [r for r in types.iter_rows(named=True) if r["network_gbps"] is not None]
    return [
        (a, b)
        for a, b in itertools.combinations(rows, 2)
        if (a["cloud"], a["region"], a["gpus"]) == (b["cloud"], b["region"], b["gpus"])
        and a["instance"] != b["instance"]
    ]


def mixes(
    types: pl.DataFrame, predictor: StepPredictor, job: Job, max_instances: int
) -> pl.DataFrame:
    """Every mix (CONFIG_SCHEMA rows) of two of ``types`` (catalog rows) with 1..max_instances
    instances of each, whose ranks suit the job's global batch."""
    scales: dict[str, float] = {}
    out: list[dict[str, Any]] = []
    for a, b in pairs(types):
        for dev in (a["gpu"], b["gpu"]):
            if dev not in scales:
                scales[dev] = predictor.compute_scale(dev)
        sa, sb = scales[a["gpu"]], scales[b["gpu"]]
        slow = a if sa >= sb else b
        g = a["gpus"]
        for na, nb in itertools.product(range(1, max_instances + 1), repeat=2):
            ranks = (na + nb) * g
            acc = accumulation(job, ranks)
            if acc is None:
                continue
            fa, fb = na / (na + nb), nb / (na + nb)
            spot = (
                None
                if a["spot_price_per_hour"] is None or b["spot_price_per_hour"] is None
                else na * a["spot_price_per_hour"] + nb * b["spot_price_per_hour"]
            )
            nets = (a["network_gbps"], b["network_gbps"])
            out.append(
                {
                    "config": mix_label(((a["instance"], na), (b["instance"], nb))),
                    "cloud": a["cloud"],
                    "region": a["region"],
                    "instance": f"{a['instance']}+{b['instance']}",
                    "gpu": f"{a['gpu']}+{b['gpu']}",
                    "gpus": g,
                    "count": na + nb,
                    "ranks": ranks,
                    "accumulation": acc,
                    "intra_node_GBps": min(a["intra_node_GBps"], b["intra_node_GBps"]),
                    "network_gbps": min(nets),
                    "hourly": na * a["price_per_hour"] + nb * b["price_per_hour"],
                    "spot_hourly": spot,
                    "mix": True,
                    "device": slow["gpu"],
                    "compute_scale": 1.0 / (fa / sa + fb / sb),
                    "parts": [
                        {"instance": a["instance"], "count": na},
                        {"instance": b["instance"], "count": nb},
                    ],
                }
            )
    return pl.DataFrame(out, schema=CONFIG_SCHEMA, orient="row")
