"""Cluster what-if (after COMET): scale one figure of the system at a time (compute, HBM
capacity, HBM bandwidth, NVLink domain size, NIC bandwidth, NVLink bandwidth) and search the
best configuration again for each value; one row per knob and factor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import polars as pl

from stallscope.plan._cluster import Cluster
from stallscope.plan._errors import PlanError, listed, nearest_names
from stallscope.plan._model import Model
from stallscope.plan._search import Space, search

#: Knob name -> the Cluster.scaled argument it sets.
KNOBS: Final[dict[str, str]] = {
    "compute": "compute",
    "hbm_capacity": "hbm_capacity",
    "hbm_bandwidth": "hbm_bandwidth",
    "nvlink_domain": "nvlink_domain",
    "nic": "nic",
    "nvlink_bandwidth": "nvlink_bandwidth",
}
DEFAULT_FACTORS: Final = (0.5, 1.0, 2.0)


def parse_knob(text: str) -> tuple[str, list[float]]:
    """``"nic=0.5,1,2"`` -> ("nic", [0.5, 1.0, 2.0])."""
    name, _, values = text.partition("=")
    name = name.strip().replace("-", "_")
    if name not in KNOBS:
        raise PlanError(
            f"unknown what-if knob {name!r}: nearest {listed(nearest_names(name, KNOBS))} "
            f"(all: {listed(KNOBS)})"
        )
    try:
        factors = [float(v) for v in values.split(",")] if values else list(DEFAULT_FACTORS)
    except ValueError:
        raise PlanError(f"knob {text!r}: factors must be numbers, e.g. {name}=0.5,1,2") from None
    if any(f <= 0 for f in factors):
        raise PlanError(f"knob {text!r}: factors must be > 0")
    return name, factors


def whatif_table(
    model: Model,
    system: Cluster,
    gpus: int,
    knobs: Mapping[str, Sequence[float]] | None = None,
    global_batch: int | None = None,
    space: Space | None = None,
) -> pl.DataFrame:
    """Per knob and factor (factor 1, the baseline, added to each knob and searched once): the
    best configuration's step time, throughput and MFU, and the configuration itself."""
    knobs = knobs or {
        k: DEFAULT_FACTORS
        for k in ("compute", "hbm_capacity", "hbm_bandwidth", "nvlink_domain", "nic")
    }
    for k in knobs:
        parse_knob(f"{k}=1")  # the name's check
    memo: dict[tuple[str, float], dict[str, object]] = {}
    rows: list[dict[str, object]] = []
    for knob, factors in knobs.items():
        # every knob's line goes through the baseline (factor 1, searched once)
        for f in sorted({1.0, *(float(x) for x in factors)}):
            key = ("base", 1.0) if f == 1.0 else (knob, f)
            if key not in memo:
                scaled = system.scaled(**{KNOBS[knob]: f})
                try:
                    best = search(model, scaled, gpus, global_batch, top=1, space=space).table.row(
                        0, named=True
                    )
                    memo[key] = {
                        "step_s": best["step_s"],
                        "tokens_per_s_per_gpu": best["tokens_per_s_per_gpu"],
                        "mfu": best["mfu"],
                        "memory_GiB": best["memory_GiB"],
                        "config": _label(best),
                    }
                except PlanError as e:  # nothing fits at this factor
                    memo[key] = {
                        "step_s": None,
                        "tokens_per_s_per_gpu": None,
                        "mfu": None,
                        "memory_GiB": None,
                        "config": f"none fits: {e}",
                    }
            rows.append({"knob": knob, "factor": f, **memo[key]})
    base = memo.get(("base", 1.0))
    frame = pl.DataFrame(
        rows,
        schema_overrides={
            "step_s": pl.Float64,
            "tokens_per_s_per_gpu": pl.Float64,
            "mfu": pl.Float64,
            "memory_GiB": pl.Float64,
        },
    )
    if base is None or base["step_s"] is None:
        return frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("speedup"))
    return frame.with_columns((pl.lit(base["step_s"]) / pl.col("step_s")).alias("speedup"))


def _label(row: Mapping[str, object]) -> str:
    parts = [f"tp{row['tp']}", f"pp{row['pp']}", f"dp{row['dp']}", f"mb{row['micro_batch']}"]
    if row.get("ep") is not None:  # a mixture-of-experts model: its expert split
        parts[3:3] = [f"ep{row['ep']}", f"etp{row['etp']}"]
    if row["interleave"] != 1:
        parts.append(f"v{row['interleave']}")
    parts.append(f"rc-{row['recompute']}")
    if row["sequence_parallel"]:
        parts.append("sp")
    parts.append(f"z{row['zero']}")
    return ".".join(parts)
