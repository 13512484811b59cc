"""Fetch and prep times of each sample, measured where the sample is loaded (a DataLoader
worker, a forked process whose trace records nothing, or the main process), carried to the
main process with the batch, and recorded there.

A dataset calls `fetched(start_ns, end_ns, nbytes)` after reading a sample's bytes and
`prepared(start_ns, end_ns)` after decoding and transforming it; `TimedCollate` (the
DataLoader's collate_fn, run where the batch is assembled) notes the collation as prep too,
takes the intervals noted since the last batch and returns them with the batch as a
`TimedBatch`. In the main process, `record`
writes two kinds of events:

- the loading itself, on a lane of the process that did it (its pid): regions ``worker_fetch``
  and ``worker_prep`` of category ``other`` (they claim no stall time: a worker loading ahead
  while the model computes stalls nothing);
- the part of the main thread's wait for this batch during which the batch was being fetched
  or prepared: regions ``loader_fetch`` (category data_fetch) and ``loader_prep`` (data_prep)
  on the main thread, inside the wait, so that the stall table splits the data stall into fetch
  and prep. The rest of the wait (the worker not yet on this batch, collation, the hand-over
  between processes) stays unsplit data.

Times are CLOCK_MONOTONIC ns (stallscope.now_ns), one clock for every process on the machine.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from stallscope import _core
from stallscope._schema import CATEGORY_ID, KIND_ID

Array = np.ndarray[Any, Any]

#: Intervals noted in this process and not yet taken by a batch: (is_fetch, start_ns, end_ns,
#: bytes). Bounded: a dataset read without TimedCollate must not grow it without end.
_pending: deque[tuple[bool, int, int, int]] = deque(maxlen=1 << 16)

_REGION: Final = KIND_ID["region"]


def fetched(start_ns: int, end_ns: int, nbytes: int = 0) -> None:
    """Note that a sample's bytes were read from start_ns to end_ns (stallscope.now_ns)."""
    _pending.append((True, start_ns, end_ns, nbytes))


def prepared(start_ns: int, end_ns: int) -> None:
    """Note that a sample was decoded and transformed from start_ns to end_ns."""
    _pending.append((False, start_ns, end_ns, 0))


@dataclass
class TimedBatch:
    """A batch and how it was loaded: ``fetch`` is an (n, 3) int64 array of [start_ns, end_ns)
    and bytes read per sample, ``prep`` an (n, 2) one of [start_ns, end_ns), ``pid`` the
    loading process."""

    batch: Any
    fetch: Array
    prep: Array
    pid: int

    @property
    def nbytes(self) -> int:
        return int(self.fetch[:, 2].sum())


def _take() -> tuple[Array, Array]:
    items = list(_pending)
    _pending.clear()
    fetch = np.array([(s, e, b) for f, s, e, b in items if f], dtype=np.int64).reshape(-1, 3)
    prep = np.array([(s, e) for f, s, e, _ in items if not f], dtype=np.int64).reshape(-1, 2)
    return fetch, prep


class TimedCollate:
    """A collate_fn that returns `TimedBatch(inner(samples), ...)` with the fetch and prep
    intervals noted since the previous batch of this process; the collation itself (stacking
    the samples) is one more prep interval."""

    def __init__(self, inner: Callable[[list[Any]], Any]) -> None:
        self.inner = inner

    def __call__(self, samples: list[Any]) -> TimedBatch:
        began = _core.now_ns()
        batch = self.inner(samples)
        prepared(began, _core.now_ns())  # batching the samples is preparation too
        fetch, prep = _take()
        return TimedBatch(batch, fetch, prep, os.getpid())


class FreshWorker:
    """A DataLoader worker_init_fn: forget the intervals a forked worker inherited from its
    parent (noted before the fork), then run `inner` (the user's worker_init_fn), if any."""

    def __init__(self, inner: Callable[[int], None] | None) -> None:
        self.inner = inner

    def __call__(self, worker_id: int) -> None:
        _pending.clear()
        if self.inner is not None:
            self.inner(worker_id)


def forget() -> None:
    """Drop the intervals noted and not yet taken (samples read outside a batch)."""
    _pending.clear()


_ids: dict[str, int] = {}


def _intern(s: str) -> int:
    v = _ids.get(s)
    if v is None:
        v = _ids[s] = _core.intern(s)
    return v


def clip(intervals: Array, lo: int, hi: int) -> Array:
    """The parts of the [start, end) rows (the first two columns) inside [lo, hi), empty ones
    dropped ((k, 2) int64)."""
    if intervals.size == 0 or hi <= lo:
        return np.zeros((0, 2), np.int64)
    c = np.clip(intervals[:, :2], lo, hi)
    out: Array = c[c[:, 1] > c[:, 0]]
    return out


def record(timed: TimedBatch, wait_start_ns: int, wait_end_ns: int) -> None:
    """Record how `timed` was loaded and which part of the main thread's wait for it (from
    wait_start_ns to wait_end_ns) was its fetch and its prep (the module docstring)."""
    if not _core.recording():
        return
    lane = _core.current_lane()
    detail = _intern(f"pid={timed.pid}")
    other = CATEGORY_ID["other"]
    for s, e, b in timed.fetch.tolist():
        _core.record(_REGION, other, _intern("worker_fetch"), s, e, 0, b, timed.pid, -1, detail)
    for s, e in timed.prep.tolist():
        _core.record(_REGION, other, _intern("worker_prep"), s, e, 0, 0, timed.pid, -1, detail)
    for rows, name, cat in (
        (timed.fetch, "loader_fetch", "data_fetch"),
        (timed.prep, "loader_prep", "data_prep"),
    ):
        for s, e in clip(rows, wait_start_ns, wait_end_ns).tolist():
            _core.record(_REGION, CATEGORY_ID[cat], _intern(name), s, e, 0, 0, lane, -1, 0)
