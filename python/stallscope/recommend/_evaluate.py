"""Each configuration's predicted step, the steps the work takes on it, its hours and its
on-demand cost (hours x the configuration's price per hour: count x price per instance)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from stallscope.analysis import STALL_COLUMNS
from stallscope.recommend._candidates import Excluded
from stallscope.recommend._predictor_seam import PREDICTION_SCHEMA, Shape, StepPredictor

NS_PER_HOUR = 3.6e12

_SHAPE_COLUMNS = (
    "device",
    "count",
    "gpus",
    "intra_node_GBps",
    "network_gbps",
    "accumulation",
    "compute_scale",
)


def evaluate(
    configs: pl.DataFrame,
    predictor: StepPredictor,
    micro_batches: float,
    excluded: Excluded,
) -> pl.DataFrame:
    """``configs`` with step_ns, the stall columns, steps, hours and cost. Configurations the
    predictor could not predict go to ``excluded`` with its reason. Configurations with the same
    hardware are predicted once."""
    shapes = configs.select(_SHAPE_COLUMNS).unique(maintain_order=True)
    got = predictor.predict(
        [
            Shape(
                device=d,
                nodes=n,
                ranks_per_node=g,
                intra_node_GBps=intra,
                network_gbps=net,
                accumulation=acc,
                compute_scale=scale,
            )
            for d, n, g, intra, net, acc, scale in shapes.iter_rows()
        ]
    )
    if got.height != shapes.height or got.columns != list(PREDICTION_SCHEMA):
        raise TypeError(
            f"the predictor returned {got.height} rows with columns {got.columns} for "
            f"{shapes.height} shapes; expected one row per shape with {list(PREDICTION_SCHEMA)}"
        )
    joined = configs.join(
        pl.concat([shapes, got], how="horizontal"),
        on=list(_SHAPE_COLUMNS),
        how="left",
        nulls_equal=True,
        maintain_order="left",
    )
    bad = joined.filter(pl.col("problem").is_not_null())
    for problem, rows in bad.group_by("problem", maintain_order=True):
        for (cloud, region, instance), part in rows.group_by(
            "cloud", "region", "instance", maintain_order=True
        ):
            excluded.add(
                {"cloud": cloud, "region": region, "instance": instance},
                part["count"].to_list(),
                f"not predicted: {problem[0]}",
            )
    ok = joined.filter(pl.col("problem").is_null()).drop("problem")
    # numpy divides as IEEE does (polars multiplies by the reciprocal): a configuration of n
    # instances for k steps and one of 2n for k / 2 steps then cost exactly the same.
    ranks = ok["ranks"].to_numpy() * ok["accumulation"].to_numpy()
    steps = np.maximum(1.0, np.ceil(micro_batches / ranks - 1e-9))
    hours = steps * ok["step_ns"].to_numpy() / NS_PER_HOUR
    return ok.with_columns(
        steps=pl.Series(steps, dtype=pl.Int64),
        hours=pl.Series(hours, dtype=pl.Float64),
        cost=pl.Series(hours * ok["hourly"].to_numpy(), dtype=pl.Float64),
    )


def shares(row: dict[str, float], columns: tuple[str, ...] = STALL_COLUMNS) -> dict[str, float]:
    """Each stall column as a share of the step (0..1)."""
    step = row["step_ns"]
    return {c: (row[c] / step if step > 0 and math.isfinite(step) else 0.0) for c in columns}
