"""What one rank did in one step, measured from its events: the compute of each phase, DDP's
buckets (when each became ready, in compute time after the backward began), the other
collectives, and the backward's work after its gradients were all-reduced.

CPU runs (compute regions on threads): a region's phase comes from its name (forward / fwd,
backward / bwd, optim...; anything else is "other" where no named phase covers it). A thread is
not computing while it is blocked on communication (the stall table's rule): in a synchronous
collective, or in DDP's wait from the last bucket's start to the end of the communication then
in flight on that thread. A bucket is ready when DDP calls its hook (the bucket event's start).

GPU runs (kernels on streams): a kernel's phase comes from when the host launched it (its
runtime call, by correlation): inside the optimizer's host span (Optimizer.step, "## optimizer
##" or a region named optim...), inside the backward's (autograd's evaluate_function calls,
"## backward ##" or a region named backward), before the backward (forward), else other. A
bucket's all-reduce is a bucket event (native runs) or an NCCL all-reduce kernel launched during
the backward (Kineto traces record no buckets); it is ready when the compute kernels launched
before it have ended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope._schema import detail_value
from stallscope.predict._spans import EMPTY, Spans

Array = np.ndarray[Any, Any]

_PHASE_OF_NAME: Final = (
    ("backward", re.compile(r"backward|bwd", re.IGNORECASE)),
    ("optimizer", re.compile(r"optim", re.IGNORECASE)),
    ("forward", re.compile(r"forward|fwd", re.IGNORECASE)),
)
_GPU_BACKWARD: Final = re.compile(r"^(## backward ##|autograd::engine::evaluate_function)")
_GPU_OPTIMIZER: Final = re.compile(r"^(Optimizer\.step|## optimizer ##)")
_GPU_FORWARD: Final = re.compile(r"^(## forward ##|DistributedDataParallel\.forward)")
_NCCL_OP: Final = (
    ("all_reduce", re.compile(r"allreduce", re.IGNORECASE)),
    ("all_gather", re.compile(r"allgather", re.IGNORECASE)),
    ("reduce_scatter", re.compile(r"reducescatter", re.IGNORECASE)),
    ("broadcast", re.compile(r"broadcast", re.IGNORECASE)),
    ("all_to_all", re.compile(r"alltoall", re.IGNORECASE)),
    ("send_recv", re.compile(r"sendrecv|send|recv", re.IGNORECASE)),
    ("reduce", re.compile(r"reduce", re.IGNORECASE)),
)


def phase_of_name(name: str) -> str:
    """A region's phase from its name (CPU runs)."""
    for phase, pat in _PHASE_OF_NAME:
        if pat.search(name):
            return phase
    return "other"


def collective_of_kernel(name: str) -> str:
    """The collective an NCCL kernel runs (ncclKernel_AllReduce_RING_LL_Sum_float -> all_reduce)."""
    compact = name.replace("_", "").replace(" ", "")
    for op, pat in _NCCL_OP:
        if pat.search(compact):
            return op
    return "other"


@dataclass
class StepFacts:
    """One rank's step."""

    rank: int
    step: int
    compute: dict[str, int] = field(default_factory=dict)  # phase -> busy ns
    memcpy: dict[str, int] = field(default_factory=dict)  # phase -> copy ns outside compute
    matmul: dict[str, int] = field(default_factory=dict)  # phase -> matmul-class kernel ns
    kernels: dict[str, int] = field(default_factory=dict)  # phase -> all kernel ns (the mix)
    tail_ns: int = 0  # backward compute after DDP's wait for the all-reduces
    precision: dict[str, int] = field(default_factory=dict)  # matmul ns per stated precision
    buckets: list[tuple[int, int, int, int]] = field(default_factory=list)
    # (index, bytes, ready_ns: backward compute before it was ready, measured_ns)
    collectives: list[tuple[str, int, int, str, int, bool, int]] = field(default_factory=list)
    # (name, bytes, group_size, phase, offset_ns: phase compute before it, blocking, measured_ns)


class RankEvents:
    """One rank's events as NumPy columns, sorted by start."""

    def __init__(self, df: pl.DataFrame) -> None:
        df = df.sort("start_ns")
        self.kind = df["kind"].cast(pl.String).to_numpy()
        self.category = df["category"].cast(pl.String).fill_null("").to_numpy()
        self.name = df["name"].fill_null("").to_list()
        self.start = df["start_ns"].to_numpy()
        self.end = df["end_ns"].to_numpy()
        self.lane = df["lane"].fill_null(0).to_numpy()
        self.corr = df["correlation"].fill_null(0).to_numpy()
        self.nbytes = df["bytes"].fill_null(0).to_numpy()
        self.detail = df["detail"].to_list()

    def rows(self, kinds: tuple[str, ...], lo: int, hi: int) -> Array:
        """Indices of the events of ``kinds`` starting in [lo, hi)."""
        a, b = np.searchsorted(self.start, [lo, hi], side="left")
        idx = np.arange(a, b)
        return idx[np.isin(self.kind[idx], kinds)]


def cpu_step(ev: RankEvents, rank: int, step: int, lo: int, hi: int) -> StepFacts:
    """The facts of a CPU run's step [lo, hi) (module docstring)."""
    f = StepFacts(rank, step)
    reg = ev.rows(("region",), lo, hi)
    reg = reg[ev.category[reg] == "compute"]
    comm = ev.rows(("collective", "p2p", "bucket"), lo, hi)
    buckets = comm[ev.kind[comm] == "bucket"]
    calls = comm[ev.kind[comm] != "bucket"]
    phase = np.array([phase_of_name(ev.name[i]) for i in reg], dtype=object)
    if buckets.size and not np.any(phase == "backward"):
        # No region says backward: the compute region holding the first bucket's start is it.
        t = ev.start[buckets].min()
        holder = reg[(ev.start[reg] <= t) & (ev.end[reg] > t)]
        phase[np.isin(reg, holder)] = "backward"
    blocked: dict[int, Spans] = {}
    wait_end: int | None = None
    sync = (
        calls[[detail_value(ev.detail[i], "async") != "1" for i in calls]] if calls.size else calls
    )
    for ln in np.unique(ev.lane[reg]):
        s_list = [ev.start[sync[ev.lane[sync] == ln]]]
        e_list = [ev.end[sync[ev.lane[sync] == ln]]]
        on_lane = buckets[ev.lane[buckets] == ln]
        if on_lane.size:
            t_last = int(ev.start[on_lane].max())
            held = comm[ev.lane[comm] == ln]
            flight = Spans.of(ev.start[held], ev.end[held])
            k = np.searchsorted(flight.start, t_last, side="right") - 1
            if k >= 0 and flight.end[k] > t_last:
                s_list.append(np.array([t_last]))
                e_list.append(np.array([flight.end[k]]))
                wait_end = int(flight.end[k])
        blocked[int(ln)] = Spans.of(np.concatenate(s_list), np.concatenate(e_list))
    spans: dict[str, Spans] = {}
    for ph in ("forward", "backward", "optimizer", "other"):
        pieces = [
            Spans.of(
                ev.start[reg[(phase == ph) & (ev.lane[reg] == ln)]],
                ev.end[reg[(phase == ph) & (ev.lane[reg] == ln)]],
            ).minus(b)
            for ln, b in blocked.items()
        ]
        got = Spans.of(
            np.concatenate([p.start for p in pieces]) if pieces else [],
            np.concatenate([p.end for p in pieces]) if pieces else [],
        )
        spans[ph] = got.clip(lo, hi)
    named = Spans.of(
        np.concatenate([spans[p].start for p in ("forward", "backward", "optimizer")]),
        np.concatenate([spans[p].end for p in ("forward", "backward", "optimizer")]),
    )
    spans["other"] = spans["other"].minus(named)
    bwd = spans["backward"]
    if wait_end is not None and len(bwd):
        f.tail_ns = int(bwd.total - bwd.busy_before(wait_end))
    for ph, sp in spans.items():
        f.compute[ph] = sp.total - (f.tail_ns if ph == "backward" else 0)
    f.kernels = {ph: f.compute[ph] for ph in spans}
    used: set[int] = set()
    for i in buckets[np.argsort(ev.start[buckets], kind="stable")]:
        ready = int(bwd.busy_before(ev.start[i]))
        f.buckets.append((int(ev.corr[i]), int(ev.nbytes[i]), ready, int(ev.end[i] - ev.start[i])))
        mine = calls[
            (ev.lane[calls] == ev.lane[i])
            & (ev.start[calls] >= ev.start[i])
            & (ev.start[calls] <= ev.end[i])
            & (ev.nbytes[calls] == ev.nbytes[i])
        ]
        used.update(int(j) for j in mine[:1])
    for i in calls:
        if int(i) in used:
            continue
        ph = _phase_at(spans, int(ev.start[i]))
        sp = spans.get(ph, EMPTY)
        first = sp.first()
        offset = int(sp.busy_before(ev.start[i])) if first is not None else 0
        blocking = detail_value(ev.detail[i], "async") != "1"
        f.collectives.append(
            (
                ev.name[i],
                int(ev.nbytes[i]),
                _group_size(ev.detail[i]),
                ph,
                offset,
                blocking,
                int(ev.end[i] - ev.start[i]),
            )
        )
    return f


def _phase_at(spans: dict[str, Spans], t: int) -> str:
    """The named phase whose compute is under way (or last ran) at ``t`` on the host."""
    best, when = "other", -1
    for ph in ("forward", "backward", "optimizer"):
        sp = spans[ph]
        first = sp.first()
        if first is not None and first <= t and first > when:
            best, when = ph, first
    return best


def _group_size(detail: str | None) -> int:
    v = detail_value(detail, "group_size")
    try:
        return max(1, int(v)) if v is not None else 1
    except ValueError:
        return 1
