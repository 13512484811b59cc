"""A built engine graph frozen into arrays and timed natively: the same run() as
``_engine.Graph.run`` (its reference), for graphs re-timed many times with new durations (the
planner times one schedule graph per configuration of its shape)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stallscope import _core
from stallscope.predict._engine import CATEGORIES, Graph, SimulationError, Timeline


def _csr(lists: list[tuple[int, ...]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    idx = np.fromiter((d for x in lists for d in x), dtype=np.int32, count=int(ptr[-1]))
    return ptr, idx


@dataclass(frozen=True)
class CompiledGraph:
    """A graph's structure (order, streams, dependencies) as arrays. ``graph`` is None for a
    structure built as arrays only (``from_arrays``: re-timed, never attributed)."""

    graph: Graph | None
    order: npt.NDArray[np.int32]
    stream: npt.NDArray[np.int32]
    n_streams: int
    dep_ptr: npt.NDArray[np.int64]
    dep_idx: npt.NDArray[np.int32]
    wait_ptr: npt.NDArray[np.int64]
    wait_idx: npt.NDArray[np.int32]

    @classmethod
    def of(cls, graph: Graph) -> CompiledGraph:
        """Freeze ``graph`` (a dependency loop raises SimulationError, as run() does)."""
        dp, di = _csr(graph.deps)
        wp, wi = _csr(graph.wait_on)
        stream = np.asarray(graph.stream_of, dtype=np.int32)
        n = len(stream)
        for idx in (di, wi):
            if len(idx) and (idx.min() < 0 or idx.max() >= n):
                graph._order()  # the engine's own error names the task
        c = cls.from_arrays(stream, len(graph.streams), dp, di, wp, wi, graph)
        return c

    @classmethod
    def from_arrays(
        cls,
        stream: npt.NDArray[np.int32],
        n_streams: int,
        dep_ptr: npt.NDArray[np.int64],
        dep_idx: npt.NDArray[np.int32],
        wait_ptr: npt.NDArray[np.int64],
        wait_idx: npt.NDArray[np.int32],
        graph: Graph | None = None,
    ) -> CompiledGraph:
        """A structure given as arrays (CSR dependencies); a loop raises SimulationError."""
        order = _core.engine_order(stream, n_streams, dep_ptr, dep_idx, wait_ptr, wait_idx)
        if order is None:
            if graph is not None:
                graph._order()  # the engine's own error names a task of the loop
            raise SimulationError(
                "the simulated step waits on itself: the graph has a dependency loop"
            )
        return cls(graph, order, stream, n_streams, dep_ptr, dep_idx, wait_ptr, wait_idx)

    def __len__(self) -> int:
        return len(self.stream)

    def run(self, duration: npt.ArrayLike | None = None) -> Timeline:
        """The timeline for ``duration`` (ns per task; default: the graph's own)."""
        if self.graph is None:
            raise ValueError("a graph built as arrays has no Timeline: use makespans()")
        d = np.asarray(self.graph.duration if duration is None else duration, dtype=np.int64)
        start, end, ready = _core.engine_run(
            self.order, self.stream, self.n_streams, self.dep_ptr, self.dep_idx, self.wait_ptr,
            self.wait_idx, d,
        )  # fmt: skip
        return Timeline(self.graph, start.tolist(), end.tolist(), ready.tolist())

    def makespans(self, durations: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The makespan (ns) for each row of ``durations`` (rows x tasks, ns)."""
        d = np.ascontiguousarray(durations, dtype=np.int64)
        if d.ndim != 2 or d.shape[1] != len(self):
            raise ValueError(f"durations must be (rows, {len(self)}), got {d.shape}")
        return _core.engine_makespans(
            self.order, self.stream, self.n_streams, self.dep_ptr, self.dep_idx, self.wait_ptr,
            self.wait_idx, d,
        )  # fmt: skip

    def makespans_by_slot(
        self, costs: npt.ArrayLike, slot: npt.ArrayLike, mult: npt.ArrayLike
    ) -> npt.NDArray[np.int64]:
        """``makespans`` of the durations ``rint(costs[:, slot] * mult)`` (costs: rows x slots,
        ns; slot and mult per task), computed row by row natively instead of as a rows x
        tasks matrix."""
        c = np.ascontiguousarray(costs, dtype=np.float64)
        s = np.ascontiguousarray(slot, dtype=np.int32)
        m = np.ascontiguousarray(mult, dtype=np.float64)
        if c.ndim != 2 or s.shape != (len(self),) or m.shape != (len(self),):
            raise ValueError(
                f"costs must be (rows, slots) and slot, mult ({len(self)},), got {c.shape}, "
                f"{s.shape}, {m.shape}"
            )
        return _core.engine_makespans_by_slot(
            self.order, self.stream, self.n_streams, self.dep_ptr, self.dep_idx, self.wait_ptr,
            self.wait_idx, s, m, c,
        )  # fmt: skip


def attribute_fast(
    timeline: Timeline, rank_class: int, step_end: int | None = None
) -> dict[str, int]:
    """``_engine.attribute`` vectorized (the same columns): every elementary interval between
    two cut points goes to the first category active then, host to what nothing claims."""
    return attribute_classes(timeline, [rank_class], step_end)[0]


def attribute_classes(
    timeline: Timeline, classes: list[int], step_end: int | None = None
) -> list[dict[str, int]]:
    """``attribute_fast`` of several rank classes of one timeline (task facts read once)."""
    g = timeline.graph
    prio = {c: i for i, c in enumerate(CATEGORIES)}
    cls_of_stream = np.fromiter((s.rank_class for s in g.streams), dtype=np.int64)
    task_cls = cls_of_stream[np.asarray(g.stream_of, dtype=np.int64)]
    codes = {c: prio.get(c, -1) for c in {*g.category, *g.wait_as}}
    run_all = np.array([codes[c] for c in g.category], dtype=np.int64)
    wait_all = np.array([codes[c] for c in g.wait_as], dtype=np.int64)
    start_all = np.asarray(timeline.start, dtype=np.int64)
    end_all = np.asarray(timeline.end, dtype=np.int64)
    ready_all = np.asarray(timeline.ready, dtype=np.int64)
    out: list[dict[str, int]] = []
    for rank_class in classes:
        mine = task_cls == rank_class
        start, end, ready = start_all[mine], end_all[mine], ready_all[mine]
        run_cat, wait_cat = run_all[mine], wait_all[mine]
        stop = int(end.max()) if step_end is None and len(end) else (step_end or 0)
        out.append(_columns(start, end, ready, run_cat, wait_cat, stop, prio["host"]))
    return out


def _columns(
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    ready: npt.NDArray[np.int64],
    run_cat: npt.NDArray[np.int64],
    wait_cat: npt.NDArray[np.int64],
    stop: int,
    host: int,
) -> dict[str, int]:
    keep_run = (run_cat >= 0) & (end > start)  # running time (category NONE claims none)
    keep_wait = start > ready
    s = np.concatenate([start[keep_run], ready[keep_wait]]).clip(0, stop)
    e = np.concatenate([end[keep_run], start[keep_wait]]).clip(0, stop)
    c = np.concatenate([run_cat[keep_run], wait_cat[keep_wait]])
    ok = e > s
    s, e, c = s[ok], e[ok], c[ok]
    out = dict.fromkeys(CATEGORIES, 0)
    if not len(s):
        out["host"] = stop
        return out
    cuts = np.unique(np.concatenate([s, e, [0, stop]]))
    k = len(CATEGORIES)
    active = np.zeros((k, len(cuts)), dtype=np.int64)
    np.add.at(active, (c, np.searchsorted(cuts, s)), 1)
    np.add.at(active, (c, np.searchsorted(cuts, e)), -1)
    on = np.cumsum(active, axis=1)[:, :-1] > 0  # per category, per elementary segment
    seg = np.diff(cuts)
    top = np.where(on.any(axis=0), on.argmax(axis=0), host)
    sums = np.bincount(top, weights=seg, minlength=k)
    for i, cat in enumerate(CATEGORIES):
        out[cat] = int(sums[i])
    return out
