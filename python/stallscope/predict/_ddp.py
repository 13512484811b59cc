"""One DDP training step per rank class, on the engine: built once per profile and shape,
re-timed for every target configuration.

Per rank class, a compute stream (the device, or the training thread on a CPU run) and a comm
stream. The compute stream runs, in order: the data wait, the host time, then per micro-batch
the forward, the backward in segments (one per gradient bucket: the compute before the bucket
was ready), the rest of the backward; then the wait for the gradient all-reduces, the backward's
work after them (DDP copying reduced gradients back), and the optimizer. A bucket's all-reduce
goes on the comm stream once its segment has ended and the previous all-reduce is done (stream
order), so the last bucket can never overlap compute. Its start also waits for every other
class to arrive at it (a collective starts when its last member does): that wait is sync wait.
With gradient accumulation the first micro-batches communicate nothing (DDP's no_sync).

Other collectives sit in their phase at their measured offset (compute time after the phase
began): a blocking one on the compute stream (the thread waits), the others on the comm stream.

Where collectives cannot progress while the rank computes (the profile's ``comm_overlap`` below
1: a CPU run whose cores all compute), a bucket's all-reduce effectively starts once the share
1 - comm_overlap of the backward compute after its ready point is done.

Attribution per class runs over [0, the slowest class's end): every class's step is the same
period in steady state, and a faster class's slack is spent waiting in the next step's first
collective, so it counts as sync wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stallscope.predict._engine import CATEGORIES, NONE, Graph, Timeline, attribute
from stallscope.predict._profile import Collective, Profile

#: Comm task key: ("bucket", index, micro-batch) or ("coll", position, micro-batch).
Key = tuple[str, int, int]


@dataclass
class _Class:
    name: str
    ranks: int
    compute: list[tuple[int, str, float]] = field(default_factory=list)  # task, phase, base ns
    comm: list[tuple[int, Key]] = field(default_factory=list)
    markers: dict[Key, int] = field(default_factory=dict)
    data: int = -1
    host: int = -1


@dataclass
class StepResult:
    """A simulated step: the step time and, per rank class, its stall columns (ns)."""

    step_ns: int
    classes: list[tuple[str, int, dict[str, int]]]  # name, ranks, columns

    def columns(self) -> dict[str, float]:
        """The columns averaged over ranks (each class weighted by its ranks)."""
        total = sum(n for _, n, _ in self.classes)
        return {c: sum(n * cols[c] for _, n, cols in self.classes) / total for c in CATEGORIES}


class DdpStep:
    """The step graph of a profile for given rank classes and micro-batches; how many ranks
    each class stands for is given to run()."""

    def __init__(self, prof: Profile, classes: Sequence[str], accumulation: int = 1):
        self.prof = prof
        self.g = Graph()
        self.classes: list[_Class] = []
        for name in classes:
            c = _Class(name, 1)
            cid = self.g.rank_class(name, 1)
            self._build(c, cid, accumulation)
            self.classes.append(c)
        # A collective starts when its last member arrives: wait on the others' arrivals.
        for c in self.classes:
            for task, key in c.comm:
                others = [o.markers[key] for o in self.classes if o is not c]
                self.g.wait_on[task] = tuple(others)

    def _build(self, c: _Class, cid: int, accumulation: int) -> None:
        g, prof = self.g, self.prof
        comp = g.stream("compute", cid)
        comm = g.stream("comm", cid)

        def work(phase: str, ns: float, label: str, category: str = "compute") -> int:
            t = g.add(comp, ns, category, label=label)
            if category == "compute":
                c.compute.append((t, phase, ns))
            return t

        def collective(key: Key, coll: Collective, after: int) -> int:
            stream = comp if coll.blocking else comm
            mark = g.add(stream, 0, NONE, deps=[after], label=f"arrive {coll.name}")
            task = g.add(stream, 0, "network", label=coll.name)
            c.markers[key] = mark
            c.comm.append((task, key))
            return task

        c.data = g.add(comp, prof.data_ns, "data", label="data")
        c.host = g.add(comp, prof.host_ns, "host", label="host")
        colls = list(enumerate(prof.collectives))
        for m in range(accumulation):
            last = m == accumulation - 1
            for phase in ("forward", "backward"):
                ph = prof.phase(phase)
                total = ph.compute_ns if ph else 0.0
                points: list[tuple[float, str, int]] = [
                    (co.offset_ns, "coll", j) for j, co in colls if co.phase == phase
                ]
                if phase == "backward" and last:
                    rho = prof.comm_overlap
                    points += [
                        (b.ready_ns + (1.0 - rho) * max(0.0, total - b.ready_ns), "bucket", k)
                        for k, b in enumerate(prof.buckets)
                    ]
                done = 0.0
                bucket_comm: list[int] = []
                for at, what, k in sorted(points):
                    at = min(max(at, done), total)
                    piece = work(phase, at - done, f"{phase} to {what} {k}")
                    done = at
                    if what == "coll":
                        collective(("coll", k, m), prof.collectives[k], piece)
                    else:
                        mark = g.add(comm, 0, NONE, deps=[piece], label=f"bucket {k} ready")
                        task = g.add(comm, 0, "network", label=f"all_reduce bucket {k}")
                        c.markers[("bucket", k, m)] = mark
                        c.comm.append((task, ("bucket", k, m)))
                        bucket_comm.append(task)
                work(phase, total - done, f"{phase} rest")
                if ph and ph.memcpy_ns:
                    work(phase, ph.memcpy_ns, f"{phase} copies", "memcpy")
                if phase == "backward" and last and bucket_comm:
                    g.add(comp, 0, NONE, deps=bucket_comm, label="wait for all-reduces")
                    work("backward", prof.backward_tail_ns, "after all-reduces")
        for phase in ("optimizer", "other"):
            ph = prof.phase(phase)
            if ph is None:
                continue
            done = 0.0
            for j, co in colls:
                if co.phase != phase:
                    continue
                at = min(max(co.offset_ns, done), ph.compute_ns)
                piece = work(phase, at - done, f"{phase} to collective {j}")
                done = at
                collective(("coll", j, accumulation - 1), co, piece)
            work(phase, ph.compute_ns - done, f"{phase} rest")
            if ph.memcpy_ns:
                work(phase, ph.memcpy_ns, f"{phase} copies", "memcpy")

    def keys(self) -> list[Key]:
        """Every comm task's key (the first class's; all classes have the same)."""
        return [k for _, k in self.classes[0].comm]

    def run(
        self,
        ranks: Sequence[int],
        scale: Mapping[str, Mapping[str, float]],
        comm_ns: Mapping[Key, float],
        comm_category: str,
        data_ns: float | None = None,
    ) -> tuple[Timeline, StepResult]:
        """Re-time and simulate. ``ranks``: how many ranks each class stands for;
        ``scale[class][phase]``: compute time multipliers; ``comm_ns[key]``: each collective's
        time; ``comm_category``: network or interconnect; ``data_ns``: the data wait (None:
        the profile's; the straggler class's differs from it as measured). A task of phase "optimizer_shard" (FSDP) runs the optimizer on
        1 / ranks of the parameters."""
        g = self.g
        total = sum(ranks)
        for c, n in zip(self.classes, ranks, strict=True):
            c.ranks = n
            sc = scale[c.name]
            for task, phase, base in c.compute:
                if phase == "optimizer_shard":
                    mult = sc.get("optimizer", 1.0) / total
                else:
                    mult = sc.get(phase, 1.0)
                g.duration[task] = round(base * mult)
            for task, key in c.comm:
                g.duration[task] = round(comm_ns[key])
                g.category[task] = comm_category
            data = self.prof.data_ns if data_ns is None else data_ns
            host = self.prof.host_ns
            if c.name == "straggler":  # its own data wait and host time, as measured
                if self.prof.straggler_data_ns is not None:
                    data = max(0.0, data + self.prof.straggler_data_ns - self.prof.data_ns)
                if self.prof.straggler_host_ns is not None:
                    host = self.prof.straggler_host_ns
            g.duration[c.data] = round(data)
            g.duration[c.host] = round(host)
        t = g.run()
        ends = [t.class_end(i) for i in range(len(self.classes))]
        step = max(ends, default=0)
        out = []
        for i, c in enumerate(self.classes):
            cols = attribute(t, i, ends[i])
            cols["sync_wait"] += step - ends[i]
            out.append((c.name, c.ranks, cols))
        return t, StepResult(step, out)
