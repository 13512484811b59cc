"""Vectorised interval algebra in Polars, on one timeline.

Intervals are half-open ``[start, end)`` in int64 ns, columns ``start`` and ``end``. Every function
here works on a single timeline: to handle several ranks at once, lay them out one after another
first (`flatten`), so that no group-by or per-row Python is needed anywhere (each operation is a
sort, a cumulative maximum, a filter or an as-of join).
"""

from __future__ import annotations

import polars as pl

_S = pl.col("start")
_E = pl.col("end")


def merge_sorted(intervals: pl.LazyFrame) -> pl.LazyFrame:
    """The union of `intervals` (sorted by ``start``, every ``end > start``) as disjoint intervals
    sorted by start. Overlapping and touching intervals merge."""
    running_end = _E.cum_max()
    prev = running_end.shift(1)  # largest end among the intervals before this one
    x = intervals.select(_S, _prev=prev, _last=running_end.last())
    # A new merged interval starts where the start lies beyond every earlier end; the previous
    # merged interval ends at the running maximum just before that start.
    heads = x.filter(pl.col("_prev").is_null() | (_S > pl.col("_prev")))
    return heads.select(_S, end=pl.col("_prev").shift(-1).fill_null(pl.col("_last")))


def merge(intervals: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """The union of `intervals` (any order; empty and negative ones ignored) as disjoint
    intervals sorted by start."""
    return merge_sorted(intervals.lazy().select(_S, _E).filter(_E > _S).sort("start"))


def measure_before(merged: pl.LazyFrame, points: pl.LazyFrame, at: str = "t") -> pl.LazyFrame:
    """`points` with a column ``measure``: the total length (ns) of the union `merged` (disjoint,
    sorted, from `merge`) that lies before each point ``at`` (points sorted by ``at``). The
    measure of the union inside ``[a, b)`` is then ``measure(b) - measure(a)``."""
    length = _E - _S
    cum = merged.select(
        pl.col("start").alias("_s"), pl.col("end").alias("_e"), _before=length.cum_sum() - length
    )
    joined = points.join_asof(
        cum, left_on=at, right_on="_s", strategy="backward", check_sortedness=False
    )
    inside = (pl.col(at) - pl.col("_s")).clip(0, pl.col("_e") - pl.col("_s"))
    return joined.with_columns(measure=(pl.col("_before") + inside).fill_null(0)).drop(
        "_s", "_e", "_before"
    )


def measure_within(merged: pl.LazyFrame, windows: pl.LazyFrame) -> pl.LazyFrame:
    """`windows` (disjoint, sorted by ``start``) with a column ``measure``: the length of the union
    `merged` inside each window."""
    w = windows.with_row_index("_w")
    a = measure_before(merged, w.select("_w", t=_S)).select("_w", _a="measure")
    b = measure_before(merged, w.select("_w", t=_E)).select("_w", _b="measure")
    # Windows are disjoint and sorted, so their ends are sorted too: row order is kept.
    return (
        w.join(a, on="_w", how="left", maintain_order="left")
        .join(b, on="_w", how="left", maintain_order="left")
        .with_columns(measure=pl.col("_b") - pl.col("_a"))
        .drop("_w", "_a", "_b")
    )


def difference(a: pl.LazyFrame, b: pl.LazyFrame, cuts: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """``a \\ b`` for two unions of disjoint intervals: disjoint intervals sorted by start.
    With `cuts` (a frame with a column ``t``), the result is also split at those times."""
    edges = [
        a.select(t=_S, d=pl.lit(1, pl.Int32)),
        a.select(t=_E, d=pl.lit(-1, pl.Int32)),
        b.select(t=_S, d=pl.lit(2, pl.Int32)),
        b.select(t=_E, d=pl.lit(-2, pl.Int32)),
    ]
    if cuts is not None:
        edges.append(cuts.select("t", d=pl.lit(0, pl.Int32)))
    sweep = (
        pl.concat(edges)
        .group_by("t")
        .agg(pl.col("d").sum())
        .sort("t")
        .with_columns(state=pl.col("d").cum_sum(), nxt=pl.col("t").shift(-1))
    )
    # state = (inside a) + 2 * (inside b): exactly 1 means in a and not in b.
    return sweep.filter((pl.col("state") == 1) & (pl.col("nxt") > pl.col("t"))).select(
        start="t", end="nxt"
    )


def flatten_offsets(bounds: pl.DataFrame) -> pl.DataFrame:
    """Per key (first column) with its ``lo`` and ``hi`` (ns), the ``offset`` that lays the keys'
    ranges ``[lo, hi]`` one after another on a single timeline starting at 0:
    flat = t + offset."""
    span = (pl.col("hi") - pl.col("lo")).clip(lower_bound=0)
    return bounds.with_columns(offset=(span.cum_sum() - span) - pl.col("lo"))
