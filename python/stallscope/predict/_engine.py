"""The event-based engine of the predictor and the planner: tasks on in-order streams, with
dependencies, simulated once per rank class.

A *stream* is an in-order queue of one rank class (a CUDA stream, a comm stream, the host's main
thread, a data-loader worker): its tasks run one after another in the order they were added. A
*task* has a duration and two kinds of dependencies:

* ``deps``: tasks of the same rank whose end it needs (the gradients of a bucket, the forward
  before the backward, the batch before the forward);
* ``wait_on``: tasks it needs from elsewhere, whose wait is a stall of its own kind
  (``wait_as``): the other members of a collective (``sync_wait``: the straggler time), the
  data loader (``data``), the previous pipeline stage (``bubble``).

A task starts at ``max(end of the previous task on its stream, ends of deps, ends of wait_on)``
and ends ``duration`` later. The part of the wait after the task was otherwise ready, from
``max(previous on stream, deps)`` to its start, is a wait interval of kind ``wait_as``.

``run()`` evaluates the whole graph in one pass over a topological order (stream order plus the
dependencies), so a step of a few thousand tasks takes microseconds per task; a graph that waits
on itself is an error that names a task of the loop. The order is kept until a task is added: a
graph built once and re-timed (durations and categories changed between runs, as the predictor
does per target configuration) is ordered once; change dependencies only before the first run.

``attribute()`` turns the timeline of each rank class into the stall columns of
``stallscope.analysis.stall_table`` with the same priorities: every instant of a class's step
goes to the first category active then (compute > memcpy > sync wait > network > interconnect >
data fetch > data prep > data > bubble > host); host is the rest, so the columns sum to the step.

Times are int64 ns throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from stallscope.exceptions import StallscopeError

#: Every category a task or a wait may claim, in priority order (the stall table's order, with
#: the pipeline bubble before host); ``host`` is what nothing claims.
CATEGORIES: Final[tuple[str, ...]] = (
    "compute",
    "memcpy",
    "sync_wait",
    "network",
    "interconnect",
    "data_fetch",
    "data_prep",
    "data",
    "bubble",
    "host",
)
_PRIORITY: Final[dict[str, int]] = {c: i for i, c in enumerate(CATEGORIES)}
#: Claims no time of its own: the task only orders others (a marker, a host launch).
NONE: Final = "none"


class SimulationError(StallscopeError):
    """The simulated graph cannot run: a dependency loop, an unknown task or category."""


@dataclass(frozen=True)
class Stream:
    """An in-order queue of one rank class."""

    name: str
    rank_class: int


@dataclass
class Timeline:
    """What ``Graph.run`` returns: per task its start, its end and when it was ready on its own
    rank (``ready`` <= ``start``; the difference is its wait on ``wait_on``), all ns from 0."""

    graph: Graph
    start: list[int]
    end: list[int]
    ready: list[int]

    def class_end(self, rank_class: int) -> int:
        """When the last task of ``rank_class`` ends: its step time when the step starts at 0."""
        end = self.end
        return max((end[i] for i in self.graph.tasks_of(rank_class)), default=0)

    @property
    def makespan(self) -> int:
        """When the last task of any class ends."""
        return max(self.end, default=0)


@dataclass
class Graph:
    """Tasks on streams, built by a workload (DDP step, pipeline schedule) and run once.

    Rank classes are small integers; ``classes`` gives each a name and how many real ranks it
    stands for (a class simulates every rank that behaves alike once)."""

    streams: list[Stream] = field(default_factory=list)
    classes: list[tuple[str, int]] = field(default_factory=list)
    stream_of: list[int] = field(default_factory=list)
    duration: list[int] = field(default_factory=list)
    deps: list[tuple[int, ...]] = field(default_factory=list)
    wait_on: list[tuple[int, ...]] = field(default_factory=list)
    wait_as: list[str] = field(default_factory=list)
    category: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    #: The topological order of the last run, kept until a task is added: a graph re-timed
    #: (durations and categories changed between runs, dependencies not) is ordered once.
    _order_cache: list[int] | None = field(default=None, repr=False, compare=False)
    _class_tasks: dict[int, list[int]] | None = field(default=None, repr=False, compare=False)

    def rank_class(self, name: str, ranks: int = 1) -> int:
        """A new rank class standing for ``ranks`` identical ranks; returns its id."""
        if ranks < 1:
            raise SimulationError(f"rank class {name!r} must stand for >= 1 rank, got {ranks}")
        self.classes.append((name, ranks))
        return len(self.classes) - 1

    def stream(self, name: str, rank_class: int = 0) -> int:
        """A new in-order stream of ``rank_class``; returns its id."""
        if not self.classes and rank_class == 0:
            self.rank_class("rank", 1)
        if not 0 <= rank_class < len(self.classes):
            raise SimulationError(f"unknown rank class {rank_class}: create it with rank_class()")
        self.streams.append(Stream(name, rank_class))
        return len(self.streams) - 1

    def add(
        self,
        stream: int,
        duration_ns: float,
        category: str = "compute",
        *,
        deps: Sequence[int] = (),
        wait_on: Sequence[int] = (),
        wait_as: str = "sync_wait",
        label: str = "",
        nbytes: int = 0,
    ) -> int:
        """Append a task to ``stream``; returns its id. ``category`` is what its running time
        counts as (one of CATEGORIES, or NONE); ``wait_as`` what its wait on ``wait_on`` counts
        as. Dependencies may name tasks added later (run() orders the graph)."""
        if not 0 <= stream < len(self.streams):
            raise SimulationError(f"unknown stream {stream}: create it with stream()")
        if category != NONE and category not in _PRIORITY:
            raise SimulationError(f"unknown category {category!r}: use one of {CATEGORIES}")
        if wait_as not in _PRIORITY:
            raise SimulationError(f"unknown wait category {wait_as!r}: use one of {CATEGORIES}")
        if duration_ns < 0:
            raise SimulationError(f"task {label or len(self.duration)!r} has a negative duration")
        self._order_cache = None
        self._class_tasks = None
        self.stream_of.append(stream)
        self.duration.append(round(duration_ns))
        self.deps.append(tuple(deps))
        self.wait_on.append(tuple(wait_on))
        self.wait_as.append(wait_as)
        self.category.append(category)
        self.label.append(label)
        self.nbytes.append(nbytes)
        return len(self.duration) - 1

    def __len__(self) -> int:
        return len(self.duration)

    def tasks_of(self, rank_class: int) -> list[int]:
        """The tasks of ``rank_class``, in id order (kept until a task is added)."""
        cache = self._class_tasks
        if cache is None or sum(len(v) for v in cache.values()) != len(self.duration):
            cache = {}
            for i, st in enumerate(self.stream_of):
                cache.setdefault(self.streams[st].rank_class, []).append(i)
            self._class_tasks = cache
        return cache.get(rank_class, [])

    def _order(self) -> list[int]:
        """A topological order of the tasks: stream order plus dependencies (Kahn). Tasks added
        after their dependencies (the usual way to build) come out in id order at no extra cost."""
        n = len(self.duration)
        prev = [-1] * n
        last: dict[int, int] = {}
        for i, s in enumerate(self.stream_of):
            prev[i] = last.get(s, -1)
            last[s] = i
        if all(p < i for i, p in enumerate(prev)) and all(
            d < i for i in range(n) for d in (*self.deps[i], *self.wait_on[i])
        ):
            return list(range(n))
        succ: list[list[int]] = [[] for _ in range(n)]
        indeg = [0] * n
        for i in range(n):
            before = (*self.deps[i], *self.wait_on[i], *((prev[i],) if prev[i] >= 0 else ()))
            for d in before:
                if not 0 <= d < n:
                    raise SimulationError(f"task {self._name(i)} depends on unknown task {d}")
                succ[d].append(i)
                indeg[i] += 1
        todo = [i for i in range(n) if indeg[i] == 0]
        order: list[int] = []
        while todo:
            i = todo.pop()
            order.append(i)
            for j in succ[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    todo.append(j)
        if len(order) < n:
            stuck = next(i for i in range(n) if indeg[i] > 0)
            raise SimulationError(
                f"the simulated step waits on itself: task {self._name(stuck)} is in a dependency "
                "loop (a schedule whose streams wait on each other's later tasks)"
            )
        return order

    def _name(self, i: int) -> str:
        s = self.streams[self.stream_of[i]]
        return f"{i} ({self.label[i] or self.category[i]} on stream {s.name!r})"

    def run(self) -> Timeline:
        """Simulate: every task's start, end and own-ready time."""
        n = len(self.duration)
        start = [0] * n
        end = [0] * n
        ready = [0] * n
        free: dict[int, int] = {}
        if self._order_cache is None or len(self._order_cache) != n:
            self._order_cache = self._order()
        for i in self._order_cache:
            r = free.get(self.stream_of[i], 0)
            for d in self.deps[i]:
                if end[d] > r:
                    r = end[d]
            s = r
            for d in self.wait_on[i]:
                if end[d] > s:
                    s = end[d]
            ready[i] = r
            start[i] = s
            end[i] = free[self.stream_of[i]] = s + self.duration[i]
        # Stream order was honoured through `free` only if the order visits a stream's tasks in
        # the order they were added: _order guarantees it (prev on stream is a dependency).
        return Timeline(self, start, end, ready)


def intervals(timeline: Timeline, rank_class: int) -> list[tuple[int, int, str]]:
    """Every interval of ``rank_class`` that claims time: (start_ns, end_ns, category), the
    running time of its tasks and their waits, unsorted and possibly overlapping."""
    g = timeline.graph
    out: list[tuple[int, int, str]] = []
    start, end, ready = timeline.start, timeline.end, timeline.ready
    for i in g.tasks_of(rank_class):
        s, e, r = start[i], end[i], ready[i]
        if s > r:
            out.append((r, s, g.wait_as[i]))
        if e > s and g.category[i] != NONE:
            out.append((s, e, g.category[i]))
    return out


def attribute(timeline: Timeline, rank_class: int, step_end: int | None = None) -> dict[str, int]:
    """The stall columns of one rank class over its step [0, step_end) (default: its last task's
    end): ns per category of CATEGORIES, summing to the step."""
    end = timeline.class_end(rank_class) if step_end is None else step_end
    cuts: list[tuple[int, int, int]] = []  # (time, +1/-1, priority)
    for s, e, cat in intervals(timeline, rank_class):
        s, e = max(s, 0), min(e, end)
        if e > s:
            cuts.append((s, 1, _PRIORITY[cat]))
            cuts.append((e, -1, _PRIORITY[cat]))
    cuts.sort()
    n_cat = len(CATEGORIES)
    host = _PRIORITY["host"]
    active = [0] * n_cat
    total = [0] * n_cat
    t_prev = 0
    for t, delta, p in cuts:
        if t > t_prev:
            top = host
            for k in range(n_cat):  # the highest priority active (a plain loop: this is hot)
                if active[k]:
                    top = k
                    break
            total[top] += t - t_prev
            t_prev = t
        active[p] += delta
    total[host] += max(0, end - t_prev)
    return dict(zip(CATEGORIES, total, strict=True))
