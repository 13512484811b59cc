"""What one rank did in one step of a GPU run (kernels on streams); the rules are in
_step_facts' docstring."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from stallscope._schema import GPU_KINDS, detail_value
from stallscope.predict._kernels import kernel_class, kernel_precision
from stallscope.predict._spans import Spans
from stallscope.predict._step_facts import (
    _GPU_BACKWARD,
    _GPU_FORWARD,
    _GPU_OPTIMIZER,
    RankEvents,
    StepFacts,
    collective_of_kernel,
    phase_of_name,
)

Array = np.ndarray[Any, Any]


def launch_times(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (one rank) with ``launch_ns``: for GPU activity the start of the host runtime call
    of the same correlation (when the host launched it), else the event's own start."""
    rt = (
        df.filter((pl.col("kind") == "runtime") & (pl.col("correlation") > 0))
        .group_by("correlation")
        .agg(launch_ns=pl.col("start_ns").min())
    )
    gpu = pl.col("kind").is_in(GPU_KINDS)
    return df.join(rt, on="correlation", how="left").with_columns(
        launch_ns=pl.when(gpu & pl.col("launch_ns").is_not_null())
        .then(pl.col("launch_ns"))
        .otherwise(pl.col("start_ns"))
    )


class GpuRankEvents(RankEvents):
    """A GPU rank's events, with each one's launch time and its kernel class."""

    def __init__(self, df: pl.DataFrame) -> None:
        df = launch_times(df).sort("start_ns")
        super().__init__(df)
        self.launch = df["launch_ns"].to_numpy()
        gpu = np.isin(self.kind, GPU_KINDS)
        by_launch = np.argsort(np.where(gpu, self.launch, np.iinfo(np.int64).max), kind="stable")
        self.gpu_by_launch = by_launch[: int(gpu.sum())]  # GPU rows in launch order
        self.gpu_launch_sorted = self.launch[self.gpu_by_launch]
        # Per distinct kernel name (a trace repeats a few hundred names thousands of times).
        names = {n: (kernel_class(n) == "matmul", kernel_precision(n)) for n in set(self.name)}
        is_kernel = self.kind == "kernel"
        self.matmul = np.array([names[n][0] for n in self.name], bool) & is_kernel
        self.precision = [
            names[n][1] if m else None for n, m in zip(self.name, self.matmul, strict=True)
        ]

    def gpu_launched(self, lo: int, hi: int) -> Array:
        """GPU rows launched in [lo, hi)."""
        a, b = np.searchsorted(self.gpu_launch_sorted, [lo, hi], side="left")
        return self.gpu_by_launch[a:b]


def _host_span(
    ev: RankEvents, lo: int, hi: int, pattern: Any, native: str
) -> tuple[int, int] | None:
    """(first start, last end) of the host regions in [lo, hi) that mark a phase: Kineto's names
    (``pattern``) or a native region named for the phase."""
    reg = ev.rows(("region",), lo, hi)
    hit = [
        i
        for i in reg
        if pattern.search(ev.name[i])
        or (ev.category[i] == "compute" and phase_of_name(ev.name[i]) == native)
    ]
    if not hit:
        return None
    return int(ev.start[hit].min()), int(ev.end[hit].max())


def gpu_step(ev: GpuRankEvents, rank: int, step: int, lo: int, hi: int, world: int) -> StepFacts:
    """The facts of a GPU run's step [lo, hi) (host window; kernels by launch time)."""
    f = StepFacts(rank, step)
    bwd_span = _host_span(ev, lo, hi, _GPU_BACKWARD, "backward")
    opt_span = _host_span(ev, lo, hi, _GPU_OPTIMIZER, "optimizer")
    fwd_span = _host_span(ev, lo, hi, _GPU_FORWARD, "forward")
    rows = ev.gpu_launched(lo, hi)
    t = ev.launch[rows]
    phase = np.full(rows.size, "other", dtype=object)
    if bwd_span is not None:
        phase[t < bwd_span[0]] = "forward"
        phase[(t >= bwd_span[0]) & (t <= bwd_span[1])] = "backward"
    elif fwd_span is not None:
        phase[(t >= fwd_span[0]) & (t <= fwd_span[1])] = "forward"
    if opt_span is not None:
        phase[(t >= opt_span[0]) & (t <= opt_span[1])] = "optimizer"
    kind, cat = ev.kind[rows], ev.category[rows]
    is_comm = (kind == "kernel") & (cat == "comm")
    is_compute = (kind == "kernel") & ~is_comm & (cat != "sync") & (cat != "memcpy")
    is_copy = np.isin(kind, ("memcpy", "memset")) | ((kind == "kernel") & (cat == "memcpy"))
    spans: dict[str, Spans] = {}
    for ph in ("forward", "backward", "optimizer", "other"):
        sel = rows[is_compute & (phase == ph)]
        spans[ph] = Spans.of(ev.start[sel], ev.end[sel])
        cp = rows[is_copy & (phase == ph)]
        f.compute[ph] = spans[ph].total
        f.memcpy[ph] = Spans.of(ev.start[cp], ev.end[cp]).minus(spans[ph]).total
        dur = ev.end[sel] - ev.start[sel]
        f.kernels[ph] = int(dur.sum())
        f.matmul[ph] = int(dur[ev.matmul[sel]].sum())
        for i, d in zip(sel, dur, strict=True):
            if (prec := ev.precision[i]) is not None:
                f.precision[prec] = f.precision.get(prec, 0) + int(d)
    bwd = spans["backward"]
    compute_rows = rows[is_compute]
    # Issue points of the buckets: bucket events (native runs) or NCCL all-reduce kernels
    # launched during the backward.
    bucket_ev = ev.rows(("bucket",), lo, hi)
    colls = ev.rows(("collective",), lo, hi)
    comm_rows = rows[is_comm]
    ar_kernels = (
        comm_rows[
            (phase[is_comm] == "backward")
            & np.array([collective_of_kernel(ev.name[i]) == "all_reduce" for i in comm_rows], bool)
        ]
        if comm_rows.size
        else comm_rows
    )
    ar_bytes = [int(ev.nbytes[i]) for i in colls if _op(ev.name[i]) == "all_reduce"]
    if bucket_ev.size:
        issues = [
            (int(ev.start[i]), int(ev.corr[i]), int(ev.nbytes[i]), int(ev.end[i] - ev.start[i]))
            for i in bucket_ev
        ]
        used_kernels: set[int] = set()
    else:
        order = ar_kernels[np.argsort(ev.launch[ar_kernels], kind="stable")]
        issues = [
            (
                int(ev.launch[i]),
                k,
                ar_bytes[k] if k < len(ar_bytes) else 0,
                int(ev.end[i] - ev.start[i]),
            )
            for k, i in enumerate(order)
        ]
        used_kernels = {int(i) for i in order}
    c_launch = ev.launch[compute_rows]
    c_end = ev.end[compute_rows]
    for t_issue, index, nbytes, measured in sorted(issues):
        before = c_end[c_launch < t_issue]
        ready_at = int(before.max()) if before.size else (bwd.first() or lo)
        f.buckets.append((index, nbytes, int(bwd.busy_before(ready_at)), measured))
    # Every other comm kernel is a collective of its own.
    by_op: dict[str, list[int]] = {}
    for i in colls:
        by_op.setdefault(_op(ev.name[i]), []).append(int(i))
    seen: dict[str, int] = {}
    all_compute = Spans.of(ev.start[compute_rows], ev.end[compute_rows])
    for j, i in enumerate(comm_rows):
        if int(i) in used_kernels:
            continue
        op = collective_of_kernel(ev.name[i])
        k = seen.get(op, 0)
        seen[op] = k + 1
        match = by_op.get(op, [])
        nbytes = int(ev.nbytes[match[k]]) if k < len(match) else 0
        group = _group_size(ev.detail[match[k]]) if k < len(match) else world
        ph = str(phase[is_comm][j])
        s, e = int(ev.start[i]), int(ev.end[i])
        exposed = Spans.of([s], [e]).minus(all_compute).total
        blocking = e > s and exposed > (e - s) / 2
        offset = int(spans[ph].busy_before(s)) if ph in spans else 0
        f.collectives.append((op, nbytes, group, ph, offset, blocking, e - s))
    return f


def _op(name: str) -> str:
    """A collective event's operation in the kernel naming (all_reduce, all_gather, ...)."""
    n = name.lower().replace("c10d:", "").replace("nccl:", "")
    return collective_of_kernel(n.replace("_", ""))


def _group_size(detail: str | None) -> int:
    v = detail_value(detail, "group_size")
    try:
        return max(1, int(v)) if v is not None else 1
    except ValueError:
        return 1
