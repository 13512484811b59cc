"""HTA's GPU kernel breakdown (research/kineto-and-hta.md section 6).

`kernel_type_breakdown`: time per kernel type and overlap combination, summed over ranks (a sweep
over the merged intervals of each type; bit 1 = COMPUTATION, 2 = COMMUNICATION).
`kernel_breakdown`: per rank and type, sum/max/min/mean/std of ``dur`` per kernel name, the top
`num_kernels` kept (or up to the `duration_ratio` cumulative quantile) and the rest merged into
"others", as HTA's get_gpu_kernel_breakdown (memory kernels not analysed, its default).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope import _arrow
from stallscope.analysis._hta_loading import hta_rows, merge_by_type, sweep

TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY")


def _labels(types: tuple[str, ...]) -> dict[int, str]:
    """Running bit sum -> HTA's label ("COMPUTATION overlapping MEMORY", ...)."""
    return {
        v: " overlapping ".join(t for i, t in enumerate(types) if v & (1 << i))
        for v in range(1, 1 << len(types))
    }


def _types(include_memory_kernels: bool) -> tuple[str, ...]:
    return TYPES if include_memory_kernels else TYPES[:2]


def kernel_type_breakdown(
    events: pl.DataFrame | pl.LazyFrame, *, include_memory_kernels: bool = True
) -> pl.DataFrame:
    """kernel_type, time_ns, percentage (of the total, rounded to 0.1 as HTA), largest first.
    Bits: COMPUTATION 1, COMMUNICATION 2, MEMORY 4 (HTA's TraceAnalysis default includes memory
    kernels)."""
    types = _types(include_memory_kernels)
    # One sweep over every type's merged intervals (bit i for types[i]): the running bit sum
    # labels each stretch.
    _, label, dur = sweep(merge_by_type(hta_rows(events), types), "_k")
    per_label = np.bincount(label, weights=dur, minlength=1 << len(types))
    labels = _labels(types)
    present = [v for v in labels if np.any(label == v)]
    sums = pl.DataFrame(
        {
            "kernel_type": [labels[v] for v in present],
            "time": pl.Series([per_label[v] for v in present], dtype=pl.Float64),
        },
        schema={"kernel_type": pl.String, "time": pl.Float64},
    ).sort("time", "kernel_type", descending=[True, False])
    total = sums["time"].sum()
    pct = _arrow.series(np.round(sums["time"].to_numpy() / total * 100, 1)) if total else None
    return sums.select(
        "kernel_type", time_ns=(pl.col("time") * 1000.0).round(0).cast(pl.Int64)
    ).with_columns(percentage=sums["time"] * 0 if pct is None else pct)


def kernel_breakdown(
    events: pl.DataFrame | pl.LazyFrame,
    *,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    include_memory_kernels: bool = True,
) -> pl.DataFrame:
    """One row per rank, kernel type and kernel name (or "others"): kernel_type, name, rank,
    sum_ns, max_ns, min_ns, mean_ns, std_ns (HTA's std is in µs; here x1000)."""
    types = _types(include_memory_kernels)
    rows = hta_rows(events).filter((pl.col("stream") != -1) & pl.col("kernel_type").is_in(types))
    per = (
        rows.lazy()
        .group_by("rank", "kernel_type", "name")
        .agg(
            sum=pl.col("dur").sum(),
            max=pl.col("dur").max(),
            min=pl.col("dur").min(),
            mean=pl.col("dur").mean(),
            std=pl.col("dur").std().fill_null(0.0),
        )
        .sort("rank", "kernel_type", "name")
        .sort(["rank", "kernel_type", "sum"], descending=[False, False, True], maintain_order=True)
        .with_columns(
            _i=pl.int_range(pl.len()).over("rank", "kernel_type"),
            _n=pl.len().over("rank", "kernel_type"),
            _cum=pl.col("sum").cum_sum().over("rank", "kernel_type"),
        )
        .with_columns(
            _q=pl.col("_cum").quantile(duration_ratio, "linear").over("rank", "kernel_type")
        )
    )
    fold = (pl.col("_n") > num_kernels) & (
        (pl.col("_cum") > pl.col("_q")) | (pl.col("_i") >= num_kernels)
    )
    # HTA re-aggregates the per-name sums when it folds: every kept row then has
    # max = min = mean = sum and std 0.
    regrouped = pl.col("_n") > num_kernels
    kept = (
        per.filter(~fold)
        .with_columns(
            max=pl.when(regrouped).then(pl.col("sum")).otherwise(pl.col("max")),
            min=pl.when(regrouped).then(pl.col("sum")).otherwise(pl.col("min")),
            mean=pl.when(regrouped).then(pl.col("sum")).otherwise(pl.col("mean")),
            std=pl.when(regrouped).then(0.0).otherwise(pl.col("std")),
        )
        .drop("_i", "_n", "_cum", "_q")
    )
    others = (
        per.filter(fold)
        .group_by("rank", "kernel_type")
        .agg(
            name=pl.lit("others"),
            max=pl.col("sum").max(),
            min=pl.col("sum").min(),
            mean=pl.col("sum").mean(),
            std=pl.col("sum").std().fill_null(0.0),
            sum=pl.col("sum").sum(),
        )
    )
    out = pl.concat([kept, others.select(kept.collect_schema().names())]).sort(
        "kernel_type", "name", "rank"
    )
    ns = [(pl.col(c) * 1000.0).alias(f"{c}_ns") for c in ("sum", "max", "min", "mean", "std")]
    return out.select("kernel_type", "name", "rank", *ns).collect()
