"""One FSDP / ZeRO-3 step per rank class: parameters sharded over every rank, gathered per unit
before use and freed after, gradients reduce-scattered per unit.

The units are the profile's gradient buckets (each bucket's parameters; bucket 0 holds the last
layers, so the forward runs the units in reverse). Per class: a compute stream and two comm
streams (all-gathers; reduce-scatters), as FSDP uses. Forward: unit u's all-gather, then its
forward compute (a share of the forward in proportion to its bytes); all-gathers are issued in
order back to back, so the next unit's gathers while this one computes (prefetch). Backward: the
unit's all-gather again (parameters were freed after the forward), its backward segment (the
compute before its bucket was ready in the profile), then its reduce-scatter. The optimizer
updates only the rank's shard: its compute is the profile's divided by the ranks. The step
ends when the last reduce-scatter has ended and the optimizer has run. With gradient
accumulation every micro-batch gathers again; gradients are reduce-scattered after the last.
"""

from __future__ import annotations

from stallscope.predict._ddp import DdpStep, Key, _Class
from stallscope.predict._engine import NONE
from stallscope.predict._errors import PredictError


class FsdpStep(DdpStep):
    """The FSDP step graph of a profile (module docstring); run() as DdpStep's, with comm keys
    ("ag", unit, micro-batch) and ("rs", unit, micro-batch)."""

    def _build(self, c: _Class, cid: int, accumulation: int) -> None:
        g, prof = self.g, self.prof
        if not prof.buckets:
            raise PredictError(
                "an FSDP prediction needs the model's gradient buckets (their sizes make the "
                "sharded units): profile a DDP run with stallscope.torch.instrument(model)"
            )
        comp = g.stream("compute", cid)
        ag = g.stream("all-gather", cid)
        rs = g.stream("reduce-scatter", cid)
        total = sum(max(b.bytes, 1) for b in prof.buckets)
        fwd = prof.phase("forward")
        bwd = prof.phase("backward")
        opt = prof.phase("optimizer")

        def work(phase: str, ns: float, label: str, deps: tuple[int, ...] = ()) -> int:
            t = g.add(comp, ns, "compute", deps=deps, label=label)
            c.compute.append((t, phase, ns))
            return t

        def comm(stream: int, key: Key, after: tuple[int, ...], label: str) -> int:
            mark = g.add(stream, 0, NONE, deps=after, label=f"arrive {label}")
            task = g.add(stream, 0, "network", label=label)
            c.markers[key] = mark
            c.comm.append((task, key))
            return task

        c.data = g.add(comp, prof.data_ns, "data", label="data")
        c.host = g.add(comp, prof.host_ns, "host", label="host")
        units = list(range(len(prof.buckets)))
        reduce_scatters: list[int] = []
        for m in range(accumulation):
            last = m == accumulation - 1
            for u in reversed(units):  # forward: first layers first
                gather = comm(ag, ("ag", u, 2 * m), (), f"all_gather unit {u} (forward)")
                share = max(prof.buckets[u].bytes, 1) / total
                ns = (fwd.compute_ns if fwd else 0.0) * share
                work("forward", ns, f"forward unit {u}", deps=(gather,))
            done = 0.0
            for u in units:  # backward: last layers first
                gather = comm(ag, ("ag", u, 2 * m + 1), (), f"all_gather unit {u} (backward)")
                ready = min(max(prof.buckets[u].ready_ns, done), bwd.compute_ns if bwd else 0.0)
                seg = work("backward", ready - done, f"backward unit {u}", deps=(gather,))
                done = ready
                if last:
                    reduce_scatters.append(
                        comm(rs, ("rs", u, m), (seg,), f"reduce_scatter unit {u}")
                    )
            work("backward", (bwd.compute_ns if bwd else 0.0) - done, "backward rest")
        g.add(comp, 0, NONE, deps=reduce_scatters, label="wait for reduce-scatters")
        work("backward", prof.backward_tail_ns, "after reduce-scatters")
        if opt is not None:
            work("optimizer_shard", opt.compute_ns, "optimizer on the shard")
        other = prof.phase("other")
        if other is not None:
            work("other", other.compute_ns, "other")
