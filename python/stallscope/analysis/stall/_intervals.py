"""Vectorised interval algebra in Polars, on one timeline.

Intervals are half-open ``[start, end)`` in int64 ns, columns ``start`` and ``end``. Every function
here works on a single timeline: to handle several ranks at once, lay them out one after another
first (`flatten`), so that no group-by or per-row Python is needed anywhere (each operation is a
sort, a cumulative maximum, a filter or an as-of join). The stall table's hot path uses the
NumPy forms `Union` (measuring the union of millions of intervals) and `exclusive_arrays`.
"""

from __future__ import annotations

import numpy as np
import polars as pl

_S = pl.col("start")
_E = pl.col("end")


class Union:
    """The union of many intervals, for measuring: its length before any time, in NumPy.

    Built from the starts and the ends sorted each on its own (no argsort, no gather): the union
    only depends on them (at time t, ``#starts <= t - #ends <= t`` intervals are active), and with
    S and E sorted, the union has a gap after E[i] exactly where ``S[i + 1] > E[i]`` (the i + 1
    intervals ending first all started by E[i]; no other did). Its length before t is then
    ``(t - S[0]) - gaps before t``, with k = #starts <= t:
    ``(t - S[0]) - P[k - 1] - max(0, t - E[k - 1])``, P[m] the total length of the gaps
    ``max(0, S[i + 1] - E[i])`` for i < m. One extra array (P) of the size of the input."""

    def __init__(self, start: np.ndarray, end: np.ndarray) -> None:
        """`start`, `end`: int64 arrays of the intervals (any order, every end > start); both
        are sorted in place when writable (pass copies you own)."""
        self.s = self._sorted(start)
        self.e = self._sorted(end)
        n = self.s.size
        gaps = np.zeros(n, np.int64)  # gaps[m] = P[m]
        if n > 1:
            np.subtract(self.s[1:], self.e[:-1], out=gaps[1:])
            np.maximum(gaps[1:], 0, out=gaps[1:])
            np.cumsum(gaps[1:], out=gaps[1:])
        self.p = gaps

    @staticmethod
    def _sorted(a: np.ndarray) -> np.ndarray:
        a = np.asarray(a, np.int64)
        if not a.flags.writeable:
            return np.sort(a, kind="stable")  # timsort: fast on the ordered runs of captures
        a.sort(kind="stable")
        return a

    def __len__(self) -> int:
        return int(self.s.size)

    def before(self, t: np.ndarray) -> np.ndarray:
        """Length (ns) of the union before each time of `t` (int64, any order)."""
        t = np.asarray(t, np.int64)
        if self.s.size == 0:
            return np.zeros(t.shape, np.int64)
        k = np.searchsorted(self.s, t, side="right")
        j = np.maximum(k - 1, 0)
        out: np.ndarray = t - self.s[0] - self.p[j] - np.maximum(t - self.e[j], 0)
        out[k == 0] = 0
        return out

    def intervals(self) -> pl.DataFrame:
        """The union as disjoint intervals (start, end), sorted; touching ones merged."""
        n = self.s.size
        if n == 0:
            return pl.DataFrame(schema={"start": pl.Int64, "end": pl.Int64})
        gap = self.s[1:] > self.e[:-1]
        heads = np.concatenate(([True], gap))
        tails = np.concatenate((gap, [True]))
        return pl.DataFrame({"start": self.s[heads], "end": self.e[tails]})


def merge_sorted(intervals: pl.LazyFrame) -> pl.LazyFrame:
    """The union of `intervals` (sorted by ``start``, every ``end > start``) as disjoint intervals
    sorted by start. Overlapping and touching intervals merge."""
    running_end = _E.cum_max()
    prev = running_end.shift(1)  # largest end among the intervals before this one
    x = intervals.select(_S, _prev=prev, _last=running_end.last())
    # A new merged interval starts where the start lies beyond every earlier end; the previous
    # merged interval ends at the running maximum just before that start.
    heads = x.filter(pl.col("_prev").is_null() | (pl.col("_prev") < _S))
    return heads.select(_S, end=pl.col("_prev").shift(-1).fill_null(pl.col("_last")))


def merge(intervals: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """The union of `intervals` (any order; empty and negative ones ignored) as disjoint
    intervals sorted by start."""
    return merge_sorted(intervals.lazy().select(_S, _E).filter(_E > _S).sort("start"))


def cumulative(merged: pl.LazyFrame) -> pl.LazyFrame:
    """`merged` (disjoint, sorted, from `merge`) prepared for `measure_before`: columns _s, _e
    and _before (total length of the intervals before this one). Collect it once to reuse it."""
    length = _E - _S
    return merged.select(_s=_S, _e=_E, _before=length.cum_sum() - length)


def measure_before(
    merged: pl.LazyFrame, points: pl.LazyFrame, at: str = "t", *, prepared: bool = False
) -> pl.LazyFrame:
    """`points` with a column ``measure``: the total length (ns) of the union `merged` (disjoint,
    sorted, from `merge`; or `cumulative` of it with `prepared`) that lies before each point
    ``at`` (points sorted by ``at``). The measure of the union inside ``[a, b)`` is then
    ``measure(b) - measure(a)``."""
    cum = merged if prepared else cumulative(merged)
    joined = points.join_asof(
        cum, left_on=at, right_on="_s", strategy="backward", check_sortedness=False
    )
    inside = (pl.col(at) - pl.col("_s")).clip(0, pl.col("_e") - pl.col("_s"))
    return joined.with_columns(measure=(pl.col("_before") + inside).fill_null(0)).drop(
        "_s", "_e", "_before"
    )


def measure_within(
    merged: pl.LazyFrame, windows: pl.LazyFrame, *, prepared: bool = False
) -> pl.LazyFrame:
    """`windows` (disjoint, sorted by ``start``) with a column ``measure``: the length of the union
    `merged` (or its `cumulative` with `prepared`) inside each window."""
    cum = merged if prepared else cumulative(merged)
    w = windows.with_row_index("_w")
    a = measure_before(cum, w.select("_w", t=_S), prepared=True).select("_w", _a="measure")
    b = measure_before(cum, w.select("_w", t=_E), prepared=True).select("_w", _b="measure")
    # Windows are disjoint and sorted, so their ends are sorted too: row order is kept.
    return (
        w.join(a, on="_w", how="left", maintain_order="left")
        .join(b, on="_w", how="left", maintain_order="left")
        .with_columns(measure=pl.col("_b") - pl.col("_a"))
        .drop("_w", "_a", "_b")
    )


def _sweep(a: pl.LazyFrame, b: pl.LazyFrame, keep: int, cuts: pl.LazyFrame | None) -> pl.LazyFrame:
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
    # state = (inside a) + 2 * (inside b)
    return sweep.filter((pl.col("state") == keep) & (pl.col("nxt") > pl.col("t"))).select(
        start="t", end="nxt"
    )


def difference(a: pl.LazyFrame, b: pl.LazyFrame, cuts: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """``a \\ b`` for two unions of disjoint intervals: disjoint intervals sorted by start.
    With `cuts` (a frame with a column ``t``), the result is also split at those times."""
    return _sweep(a, b, 1, cuts)


def intersect(a: pl.LazyFrame, b: pl.LazyFrame, cuts: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """``a ∩ b`` for two unions of disjoint intervals: disjoint intervals sorted by start, split
    where either has a boundary (and at `cuts`)."""
    return _sweep(a, b, 3, cuts)


def exclusive(
    labelled: pl.LazyFrame, labels: int, cuts: pl.LazyFrame | None = None
) -> pl.LazyFrame:
    """The timeline of `labelled` intervals (columns label in 0 .. labels - 1, start, end; any
    order) cut into disjoint segments, each given the smallest label active over it: columns
    label, start, end, sorted by start. Instants where no interval is active are left out.
    With `cuts` (a column ``t``), segments are also split at those times."""
    lab = pl.col("label")
    edges = [
        labelled.select("label", t=_S, d=pl.lit(1, pl.Int32)),
        labelled.select("label", t=_E, d=pl.lit(-1, pl.Int32)),
    ]
    if cuts is not None:
        edges.append(cuts.select(label=pl.lit(None, pl.Int32), t="t", d=pl.lit(0, pl.Int32)))
    active = [
        pl.when(lab == j).then(pl.col("d")).otherwise(0).cum_sum().alias(f"_c{j}")
        for j in range(labels)
    ]
    winner = pl.coalesce(
        [pl.when(pl.col(f"_c{j}") > 0).then(pl.lit(j, pl.Int32)) for j in range(labels)]
    )
    # After the sort, the last edge at a time t holds the state from t on; the others give
    # empty segments, dropped by nxt > t.
    return (
        pl.concat([e.with_columns(lab.cast(pl.Int32)) for e in edges])
        .sort("t")
        .with_columns(*active, nxt=pl.col("t").shift(-1))
        .select(label=winner, start="t", end="nxt")
        .filter(lab.is_not_null() & (_E > _S))
    )


def exclusive_arrays(
    label: np.ndarray, start: np.ndarray, end: np.ndarray, labels: int, cuts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`exclusive` on NumPy arrays: the intervals (label in 0 .. labels - 1, start, end; any
    order) cut into disjoint segments, each with the smallest label active over it, also split
    at `cuts`: (label int32, start, end) sorted by start."""
    n = start.size
    t = np.concatenate((start, end, cuts)).astype(np.int64, copy=False)
    order = np.argsort(t, kind="stable")
    t = t[order]
    # Per edge in time order: its label (-1 for a cut) and +1 (a start) or -1 (an end).
    lab = np.concatenate((label, label, np.full(cuts.size, -1))).astype(np.int32)[order]
    delta = np.where(order < n, 1, -1).astype(np.int32)
    winner = np.full(t.size, labels, np.int32)  # labels = none active
    for j in range(labels - 1, -1, -1):  # smallest label last: it wins
        mine = lab == j
        if mine.any():
            active = np.cumsum(np.where(mine, delta, 0), dtype=np.int32) > 0
            winner[active] = j
    # After the sort, the last edge at a time t holds the state from t on; the others give
    # empty segments, dropped by next > t (as is the open end after the last edge).
    nxt = np.empty_like(t)
    nxt[:-1] = t[1:]
    if t.size:
        nxt[-1] = t[-1]
    keep = (winner < labels) & (nxt > t)
    return winner[keep], t[keep], nxt[keep]


def flatten_offsets(bounds: pl.DataFrame) -> pl.DataFrame:
    """Per key (first column) with its ``lo`` and ``hi`` (ns), the ``offset`` that lays the keys'
    ranges ``[lo, hi]`` one after another on a single timeline starting at 0:
    flat = t + offset."""
    span = (pl.col("hi") - pl.col("lo")).clip(lower_bound=0)
    return bounds.with_columns(offset=(span.cum_sum() - span) - pl.col("lo"))
