"""Sets of time spans as sorted, disjoint (start, end) int64 arrays: union, difference,
clipping and busy time before an instant. The profile extraction measures compute with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Spans:
    """Disjoint spans sorted by start (ns); ``cum[i]``: their total length before span i."""

    start: Array
    end: Array

    @staticmethod
    def of(start: Array | list[int], end: Array | list[int]) -> Spans:
        """The union of the intervals [start, end) (empty ones ignored; touching ones merge)."""
        s = np.asarray(start, dtype=np.int64)
        e = np.asarray(end, dtype=np.int64)
        keep = e > s
        s, e = s[keep], e[keep]
        if s.size == 0:
            return EMPTY
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        reach = np.maximum.accumulate(e)
        new = np.ones(s.size, bool)
        new[1:] = s[1:] > reach[:-1]
        first = np.flatnonzero(new)
        last = np.append(first[1:], s.size) - 1
        return Spans(s[first], reach[last])

    @property
    def total(self) -> int:
        return int((self.end - self.start).sum())

    def __len__(self) -> int:
        return int(self.start.size)

    def clip(self, lo: int, hi: int) -> Spans:
        """The part inside [lo, hi)."""
        s = np.maximum(self.start, lo)
        e = np.minimum(self.end, hi)
        keep = e > s
        return Spans(s[keep], e[keep])

    def minus(self, other: Spans) -> Spans:
        """This set without ``other``."""
        if len(other) == 0 or len(self) == 0:
            return self
        # Walk the edges of both: inside self and outside other.
        t = np.concatenate([self.start, self.end, other.start, other.end])
        d_self = np.concatenate([np.ones(len(self)), -np.ones(len(self)), np.zeros(2 * len(other))])
        d_other = np.concatenate(
            [np.zeros(2 * len(self)), np.ones(len(other)), -np.ones(len(other))]
        )
        order = np.lexsort((d_self + d_other, t))  # at one instant, ends before starts
        t, a, b = t[order], np.cumsum(d_self[order]), np.cumsum(d_other[order])
        on = (a > 0) & (b <= 0)
        seg_s, seg_e = t[:-1][on[:-1]], t[1:][on[:-1]]
        return Spans.of(seg_s, seg_e)

    def busy_before(self, t: Array | int) -> Array:
        """Total length of the spans before each instant of ``t``."""
        tt = np.asarray(t, dtype=np.int64)
        if len(self) == 0:
            return np.zeros(tt.shape, np.int64)
        cum = np.concatenate([[0], np.cumsum(self.end - self.start)])
        i = np.searchsorted(self.start, tt, side="right")  # spans starting at or before t
        inside = np.where(i > 0, np.minimum(self.end[np.maximum(i - 1, 0)], tt), 0)
        part = np.where(i > 0, inside - self.start[np.maximum(i - 1, 0)], 0)
        out: Array = cum[np.maximum(i - 1, 0)] * (i > 0) + np.maximum(part, 0)
        return out

    def first(self) -> int | None:
        return int(self.start[0]) if len(self) else None

    def last(self) -> int | None:
        return int(self.end[-1]) if len(self) else None


EMPTY = Spans(np.zeros(0, np.int64), np.zeros(0, np.int64))
