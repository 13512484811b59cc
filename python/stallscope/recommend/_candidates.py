"""The configurations a measured job could run on: every instance type of the catalog times
every instance count within the job's limits, and, for those left out, why.

Limits: at most ``max_instances`` instances of one type; the job's memory per GPU fits the
GPU's; with a global batch to keep, the ranks x the measured batch divide it; more than one
instance needs the catalog's network figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import polars as pl

from stallscope.recommend._job import Job, accumulation

#: Columns that describe one configuration (homogeneous or mixed), before prediction. ``hourly``
#: and ``spot_hourly``: $ per hour for all its instances. ``device`` and ``compute_scale``: what
#: the predictor is given (a mix: its slowest device, and the combined compute ratio).
#: ``parts``: the instance types and counts it is made of (one for a homogeneous one).
CONFIG_SCHEMA: Final[dict[str, pl.DataType]] = {
    "config": pl.String(),
    "cloud": pl.String(),
    "region": pl.String(),
    "instance": pl.String(),
    "gpu": pl.String(),
    "gpus": pl.Int64(),
    "count": pl.Int64(),
    "ranks": pl.Int64(),
    "accumulation": pl.Int64(),
    "intra_node_GBps": pl.Float64(),
    "network_gbps": pl.Float64(),
    "hourly": pl.Float64(),
    "spot_hourly": pl.Float64(),
    "mix": pl.Boolean(),
    "device": pl.String(),
    "compute_scale": pl.Float64(),
    "parts": pl.List(pl.Struct({"instance": pl.String(), "count": pl.Int64()})),
}

#: Columns of the table of what was left out.
EXCLUDED_SCHEMA: Final[dict[str, pl.DataType]] = {
    "cloud": pl.String(),
    "region": pl.String(),
    "instance": pl.String(),
    "counts": pl.String(),
    "reason": pl.String(),
}


@dataclass
class Excluded:
    """Rows of EXCLUDED_SCHEMA, gathered as the candidates are built."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, row: dict[str, Any], counts: list[int] | None, reason: str) -> None:
        self.rows.append(
            {
                "cloud": row["cloud"],
                "region": row["region"],
                "instance": row["instance"],
                "counts": "all" if counts is None else count_ranges(counts),
                "reason": reason,
            }
        )

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows, schema=EXCLUDED_SCHEMA, orient="row")


def count_ranges(counts: list[int]) -> str:
    """[1, 2, 3, 5, 7, 8] -> "1-3, 5, 7-8"."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(set(counts)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [c]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(out)


def label(instance: str, count: int) -> str:
    """How a homogeneous configuration is named: "p4d.24xlarge x 2"."""
    return f"{instance} x {count}"


def homogeneous(
    catalog: pl.DataFrame, job: Job, max_instances: int, excluded: Excluded
) -> pl.DataFrame:
    """One row per instance type and count (CONFIG_SCHEMA) within the job's limits; what is
    left out goes to ``excluded`` with its reason."""
    rows: list[dict[str, Any]] = []
    for r in catalog.iter_rows(named=True):
        if job.memory_gb is not None and r["gpu_memory_gb"] < job.memory_gb:
            excluded.add(
                r,
                None,
                f"the job needs {job.memory_gb:g} GB per GPU; its {r['gpu']} has "
                f"{r['gpu_memory_gb']:g} GB",
            )
            continue
        counts = list(range(1, max_instances + 1))
        if r["network_gbps"] is None and max_instances > 1:
            excluded.add(
                r,
                counts[1:],
                "the catalog gives no network bandwidth for this instance, so a job over "
                "several of them cannot be predicted (add network_gbps to price them)",
            )
            counts = [1]
        indivisible = []
        for n in counts:
            ranks = n * r["gpus"]
            acc = accumulation(job, ranks)
            if acc is None:
                indivisible.append(n)
                continue
            rows.append(
                {
                    "config": label(r["instance"], n),
                    "cloud": r["cloud"],
                    "region": r["region"],
                    "instance": r["instance"],
                    "gpu": r["gpu"],
                    "gpus": r["gpus"],
                    "count": n,
                    "ranks": ranks,
                    "accumulation": acc,
                    "intra_node_GBps": r["intra_node_GBps"],
                    "network_gbps": r["network_gbps"],
                    "hourly": n * r["price_per_hour"],
                    "spot_hourly": (
                        None if r["spot_price_per_hour"] is None else n * r["spot_price_per_hour"]
                    ),
                    "mix": False,
                    "device": r["gpu"],
                    "compute_scale": None,
                    "parts": [{"instance": r["instance"], "count": n}],
                }
            )
        if indivisible:
            excluded.add(
                r,
                indivisible,
                f"{r['gpus']} GPU(s) per instance x count x the batch of {job.batch_size} per "
                f"rank does not divide the global batch of {job.global_batch}",
            )
    return pl.DataFrame(rows, schema=CONFIG_SCHEMA, orient="row")
