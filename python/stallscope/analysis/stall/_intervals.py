"""Interval algebra of the stall table, on one timeline.

Intervals are half-open ``[start, end)`` in int64 ns. Every function here works on a single
timeline: several ranks are laid out one after another first, so that no group-by or per-row
Python is needed. `Union` measures the union of millions of intervals (NumPy); `exclusive` and
`exclusive_arrays` cut labelled intervals into disjoint segments, each with the smallest label
active over it (Polars and NumPy forms of one rule).
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

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """The union as disjoint intervals (starts, ends), sorted; touching ones merged."""
        if self.s.size == 0:
            return self.s[:0], self.e[:0]
        gap = self.s[1:] > self.e[:-1]
        heads = np.concatenate(([True], gap))
        tails = np.concatenate((gap, [True]))
        return self.s[heads], self.e[tails]

    def intervals(self) -> pl.DataFrame:
        """The union as disjoint intervals (start, end), sorted; touching ones merged."""
        if self.s.size == 0:
            return pl.DataFrame(schema={"start": pl.Int64, "end": pl.Int64})
        s, e = self.merged()
        return pl.DataFrame({"start": s, "end": e})

    def complement_in(
        self, a: np.ndarray, b: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The parts of the intervals [a_i, b_i) (int64 arrays, every b_i > a_i) the union does
        not cover: (index i of the interval each part comes from, start, end), in the order of
        the intervals, each one's parts by start."""
        us, ue = self.merged()
        if us.size == 0:
            return np.arange(a.size), a, b
        # The union's intervals that overlap [a, b): indices i0 .. i1 - 1 (disjoint, so their
        # ends are sorted too); the parts are [a, us[i0]), [ue[i0], us[i0 + 1]), ... [ue, b).
        i0 = np.searchsorted(ue, a, side="right")
        i1 = np.searchsorted(us, b, side="left")
        cnt = np.maximum(i1 - i0, 0)
        n = cnt + 1
        src = np.repeat(np.arange(a.size), n)
        k = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)  # part k of its interval
        j = i0[src] + k
        last = us.size - 1
        start = np.where(k == 0, a[src], ue[np.clip(j - 1, 0, last)])
        end = np.where(k < cnt[src], us[np.clip(j, 0, last)], b[src])
        np.maximum(start, a[src], out=start)
        np.minimum(end, b[src], out=end)
        keep = end > start
        return src[keep], start[keep], end[keep]


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
