"""HTA's GPU kernel breakdown (docs/hta-compatibility.md section 6).

`kernel_type_breakdown`: time per kernel type and overlap combination, summed over ranks (a sweep
over the merged intervals of each type; bit 1 = COMPUTATION, 2 = COMMUNICATION).
`kernel_breakdown`: per rank and type, sum/max/min/mean/std of ``dur`` per kernel name, the top
`num_kernels` kept (or up to the `duration_ratio` cumulative quantile) and the rest merged into
"others", as HTA's get_gpu_kernel_breakdown (memory kernels included, as its default).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope._utils.sorted import int_order, segment_starts
from stallscope.analysis.hta._loading import (
    KERNEL_TYPES,
    hta_arrays,
    merge_by_type,
    sweep,
    us_to_ns,
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


@fair_gil
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
    # Largest first, ties by label (made here: the frame's own sort and expressions would each
    # be a Polars query, and a query's first use in a process costs milliseconds).
    present = sorted(
        (v for v in labels if np.any(label == v)), key=lambda v: (-per_label[v], labels[v])
    )
    time = np.array([per_label[v] for v in present], dtype=np.float64)
    total = time.sum()  # as pandas sums for HTA
    pct = np.round(time / total * 100, 1) if total else time * 0
    return _arrow.frame_of(
        [
            pl.Series("kernel_type", [labels[v] for v in present], pl.String),
            _arrow.series(us_to_ns(time), "time_ns", pl.Int64),
            _arrow.series(pct, "percentage", pl.Float64),
        ]
    )


@fair_gil
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
    `duration_ratio` quantile (linear) decide which names fold into "others"; as in HTA, a name
    whose durations sum below 0 never folds."""
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
    # Name codes renumbered in the names' sorted order, so sorting by code sorts by name (the
    # names are distinct; Python's code point order is UTF-8's byte order, Polars' string order).
    by_name = np.array(sorted(range(len(rows.names)), key=rows.names.__getitem__), np.int64)
    names = [rows.names[i] for i in by_name]
    position = np.empty(by_name.size, np.int64)
    position[by_name] = np.arange(by_name.size)
    code = position[rows.name[sel]]
    rank, kt = rows.rank[sel], ktype
    dur = rows.end[sel] - rows.ts[sel]
    # Per (rank, type, name): one sort, statistics by segment.
    order = int_order(code, kt, rank)
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
        sums = stats["sum"][a:b]
        cum = np.cumsum(sums)
        # The quantile of the running sums in their sorted order: a name whose durations sum
        # below 0 (a kernel ending before it started, after HTA's ns rounding) lowers the sum.
        ranked = np.sort(cum)
        pos = (n - 1) * duration_ratio
        lo = int(np.floor(pos))
        hi = min(lo + 1, n - 1)
        q = ranked[lo] + (ranked[hi] - ranked[lo]) * (pos - lo)
        # HTA keeps names whose sum is below 0 whatever their rank: its mask meant to keep
        # nothing when no allowlist is given is `sum < 0`.
        fold[a:b] = ((cum > q) | (np.arange(n) >= num_kernels)) & (sums >= 0)
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
    # Sorted by kernel type, name and rank (unique together), here rather than by a Polars query.
    out_type = [types[int(k)] for k in out_kt]
    order = np.array(
        sorted(range(len(out_name)), key=lambda i: (out_type[i], out_name[i], out_rank[i])),
        np.int64,
    )
    return _arrow.frame_of(
        [
            pl.Series("kernel_type", [out_type[i] for i in order], pl.String),
            pl.Series("name", [out_name[i] for i in order], pl.String),
            _arrow.series(out_rank[order], "rank", pl.Int32),
            *(_arrow.series(out[c][order] * 1000.0, f"{c}_ns", pl.Float64) for c in cols),
        ]
    )


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
