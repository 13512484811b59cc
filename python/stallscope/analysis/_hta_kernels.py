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
from stallscope._sorted import segment_starts
from stallscope.analysis._hta_loading import (
    KERNEL_TYPES,
    hta_arrays,
    merge_by_type,
    sweep,
)

TYPES = KERNEL_TYPES[:3]


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
    _, label, dur = sweep(*merge_by_type(hta_arrays(events, gpu_only=True), types))
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
    sum_ns, max_ns, min_ns, mean_ns, std_ns (HTA's std is in µs; here x1000).

    In NumPy on the GPU rows sorted once: per (rank, type, name) the statistics of ``dur``;
    within a (rank, type) names by sum, largest first (ties by name), the running sum and its
    `duration_ratio` quantile (linear) decide which names fold into "others"."""
    types = _types(include_memory_kernels)
    rows = hta_arrays(events, gpu_only=True)
    gpu = rows.gpu()
    ktype = rows.kernel_type[gpu]
    sel = gpu[ktype < len(types)]  # TYPES lead KERNEL_TYPES in the same order
    ktype = ktype[ktype < len(types)].astype(np.int64)
    empty = {"kernel_type": pl.String, "name": pl.String, "rank": pl.Int32}
    cols = ("sum", "max", "min", "mean", "std")
    if sel.size == 0:
        return pl.DataFrame(schema={**empty, **{f"{c}_ns": pl.Float64 for c in cols}})
    # Name codes renumbered in the names' sorted order, so sorting by code sorts by name.
    by_name = rows.names.arg_sort().to_numpy()
    names = rows.names.gather(_arrow.series(by_name))
    position = np.empty(by_name.size, np.int64)
    position[by_name] = np.arange(by_name.size)
    code = position[rows.name[sel]]
    rank, kt = rows.rank[sel], ktype
    dur = rows.end[sel] - rows.ts[sel]
    # Per (rank, type, name): one sort, statistics by segment.
    order = np.lexsort((code, kt, rank))
    rank, kt, code, dur = rank[order], kt[order], code[order], dur[order]
    head = np.flatnonzero(segment_starts(rank, kt, code))
    stats = _segment_stats(dur, head)
    g_rank, g_kt, g_code = rank[head], kt[head], code[head]
    # Within each (rank, type): names by sum, largest first, ties by name.
    order = np.lexsort((g_code, -stats["sum"], g_kt, g_rank))
    g_rank, g_kt, g_code = g_rank[order], g_kt[order], g_code[order]
    stats = {k: v[order] for k, v in stats.items()}
    fold = np.zeros(g_rank.size, bool)
    regrouped = np.zeros(g_rank.size, bool)
    heads = np.flatnonzero(segment_starts(g_rank, g_kt))
    for a, b in zip(heads, [*heads[1:], g_rank.size], strict=True):
        n = b - a
        if n <= num_kernels:
            continue
        cum = np.cumsum(stats["sum"][a:b])  # nondecreasing: its own sorted order
        pos = (n - 1) * duration_ratio
        lo = int(np.floor(pos))
        hi = min(lo + 1, n - 1)
        q = cum[lo] + (cum[hi] - cum[lo]) * (pos - lo)
        fold[a:b] = (cum > q) | (np.arange(n) >= num_kernels)
        regrouped[a:b] = True
    # HTA re-aggregates the per-name sums when it folds: every kept row of a folded (rank,
    # type) then has max = min = mean = sum and std 0.
    for k in ("max", "min", "mean"):
        stats[k] = np.where(regrouped, stats["sum"], stats[k])
    stats["std"] = np.where(regrouped, 0.0, stats["std"])
    keep = ~fold
    out_name = [names[int(c)] for c in g_code[keep]]
    out_rank, out_kt = g_rank[keep], g_kt[keep]
    out = {k: v[keep] for k, v in stats.items()}
    if fold.any():
        f = np.flatnonzero(fold)
        fh = f[np.flatnonzero(segment_starts(g_rank[f], g_kt[f]))]
        others = _segment_stats(stats["sum"][f], np.searchsorted(f, fh))
        out = {k: np.concatenate((out[k], others[k])) for k in out}
        out_name += ["others"] * fh.size
        out_rank = np.concatenate((out_rank, g_rank[fh]))
        out_kt = np.concatenate((out_kt, g_kt[fh]))
    frame = pl.DataFrame(
        [
            pl.Series("kernel_type", [types[int(k)] for k in out_kt], pl.String),
            pl.Series("name", out_name, pl.String),
            _arrow.series(out_rank, "rank", pl.Int32),
            *(_arrow.series(out[c] * 1000.0, f"{c}_ns", pl.Float64) for c in cols),
        ]
    )
    return frame.sort("kernel_type", "name", "rank")


def _segment_stats(values: np.ndarray, head: np.ndarray) -> dict[str, np.ndarray]:
    """sum, max, min, mean and std (ddof 1; 0 for one value) of `values` per segment (`head`:
    the segments' first positions), as pandas' groupby gives them to HTA."""
    count = np.diff(np.append(head, values.size))
    total = np.add.reduceat(values, head)
    mean = total / count
    dev = (values - np.repeat(mean, count)) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.where(count > 1, np.sqrt(np.add.reduceat(dev, head) / (count - 1)), 0.0)
    return {
        "sum": total,
        "max": np.maximum.reduceat(values, head),
        "min": np.minimum.reduceat(values, head),
        "mean": mean,
        "std": std,
    }
