"""profile_of: a measured run (run directory, Kineto traces, or an events frame) -> Profile.

Steps kept: the warm-up rule (`WARMUP_RULE`) drops each rank's first steps, and a native run's
last step of each rank (it ends when the trace stops, not at a next step). Per kept step and
rank the facts come from _step_facts (CPU runs) or _step_facts_gpu (GPU runs); the stall table
gives the data and host time and the measured columns.

Overlap: on a GPU, NCCL moves data on its own while the device computes (``comm_overlap`` 1).
On a CPU run the collectives need the cores the compute holds: for each bucket issued during
the backward, the share of its all-reduce that went on while the rank still computed is
measured (its time beyond its own transfer, over the compute after it, where the transfer is
priced at the last bucket's seconds per byte); ``comm_overlap`` is 1 minus the median share
(0: collectives wait for the compute, as on a machine whose cores all compute).

Which steps: the central steps (_central: the middle half of the kept steps by step time), so
that every figure is a mean over the same rank-steps as the measured summary and the parts
compose back to the measured step (predicting the measured configuration gives back its table).

Ranks that differ: per central step, the rank the others waited for (the most own time: its
step less the communication it was exposed to) is that step's straggler; the profile's figures
are the means over the other (typical) ranks; ``straggler_factor`` is the straggler's mean
compute over the typical mean (1.0 for one rank), and the straggler's own data wait and host
time are kept beside it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import polars as pl

from stallscope._schema import GPU_KINDS
from stallscope.analysis import STALL_COLUMNS, stall_table, step_windows
from stallscope.predict._central import (
    NOISY_SPREAD,
    central_steps,
    iqr,
    mean,
    median,
    table_summary,
)
from stallscope.predict._errors import PredictError
from stallscope.predict._meta import RunMeta, meta_of_events, meta_of_kineto, meta_of_run_dir
from stallscope.predict._profile import (
    PHASES,
    PROFILE_FORMAT,
    Bucket,
    Collective,
    Loader,
    Measured,
    Phase,
    Profile,
)
from stallscope.predict._step_facts import RankEvents, StepFacts, cpu_step
from stallscope.predict._step_facts_gpu import GpuRankEvents, gpu_step

WARMUP_RULE: Final = (
    "per rank: the first max(1, n // 10) of n steps are warm-up when n >= 3 (none below); a "
    "native run's last step is dropped too (it ends when the trace stops)"
)
#: A median data wait above this share of the step (and LOADER_MIN_NS) is a data stall.
LOADER_BOUND_SHARE: Final = 0.05
LOADER_MIN_NS: Final = 1_000_000

RunArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | pl.DataFrame | pl.LazyFrame


def profile_of(run: RunArg) -> Profile:
    """The profile of a measured run: a run directory, a Kineto trace file, a folder or list of
    them, an events frame (stallscope.load / import_kineto), or a saved profile (.json).
    PredictError when it has no step markers or no compute."""
    if isinstance(run, (pl.DataFrame, pl.LazyFrame)):
        events = run.collect() if isinstance(run, pl.LazyFrame) else run
        return build_profile(events, meta_of_events(events), "events", None)
    if isinstance(run, (str, os.PathLike)):
        path = Path(run)
        if is_profile_file(path):
            return Profile.load(path)
        if path.is_dir() and any(path.glob("rank-*.parquet")):
            import stallscope

            events = stallscope.load(path)
            return build_profile(events, meta_of_run_dir(path, events), "native", str(path))
        if not path.exists():
            raise PredictError(f"{path}: no such file or directory")
        return _from_kineto([path], str(path))
    paths = [Path(p) for p in run]
    if not paths:
        raise PredictError("no run given: pass a run directory, Kineto traces or an events frame")
    return _from_kineto(paths, ", ".join(map(str, paths)))


def is_profile_file(path: Path) -> bool:
    """Whether ``path`` is a saved profile (its first bytes name the profile format)."""
    if not path.is_file() or path.name.endswith(".gz"):
        return False
    with path.open("rb") as fh:
        return PROFILE_FORMAT.encode() in fh.read(256)


def _from_kineto(paths: list[Path], label: str) -> Profile:
    import stallscope
    from stallscope.exceptions import StallscopeError

    try:
        imp = stallscope.read_kineto(paths if len(paths) > 1 else paths[0])
    except StallscopeError as e:
        # The importer's messages start with the path already.
        said = str(e)
        raise PredictError(said if said.startswith(label) else f"{label}: {said}") from None
    return build_profile(imp.events, meta_of_kineto(imp), "kineto", label)


def kept_windows(windows: pl.DataFrame, native: bool) -> pl.DataFrame:
    """The step windows the profile uses (WARMUP_RULE)."""
    out = []
    for _, w in windows.sort("rank", "start_ns").group_by("rank", maintain_order=True):
        n = w.height
        first = max(1, n // 10) if n >= 3 else 0
        last = n - 1 if native and n - first >= 2 else n
        out.append(w.slice(first, last - first))
    return pl.concat(out) if out else windows.head(0)


def build_profile(events: pl.DataFrame, meta: RunMeta, kind: str, path: str | None) -> Profile:
    """The profile of ``events`` (module docstring)."""
    windows = step_windows(events)
    if windows.height == 0:
        raise PredictError(
            f"{path or 'the events'}: no step markers, so there is no step to predict: mark "
            "steps with stallscope.step() or stallscope.loader(..., mark_steps=True); PyTorch "
            "profiler traces need ProfilerStep#N (call prof.step() each iteration)"
        )
    kept = kept_windows(windows, native=kind == "native")
    gpu = bool(events["kind"].is_in(GPU_KINDS).any())
    facts: list[StepFacts] = []
    for (rank,), df in events.partition_by("rank", as_dict=True, maintain_order=True).items():
        w = kept.filter(pl.col("rank") == rank)
        if w.height == 0:
            continue
        r = int(rank)
        windows_of_rank = w.select("step", "start_ns", "end_ns").iter_rows()
        if gpu:
            g_ev = GpuRankEvents(df)
            facts += [
                gpu_step(g_ev, r, int(s), lo, hi, meta.ranks) for s, lo, hi in windows_of_rank
            ]
        else:
            c_ev = RankEvents(df)
            facts += [cpu_step(c_ev, r, int(s), lo, hi) for s, lo, hi in windows_of_rank]
    table = stall_table(events).join(kept.select("rank", "step"), on=["rank", "step"], how="semi")
    return _summarise(facts, table, meta, kind, path, gpu, windows.height)


def _total(f: StepFacts) -> float:
    return float(sum(f.compute.values()) + f.tail_ns)


def _summarise(
    facts: list[StepFacts],
    table: pl.DataFrame,
    meta: RunMeta,
    kind: str,
    path: str | None,
    gpu: bool,
    steps_total: int,
) -> Profile:
    notes = list(meta.notes)
    if not facts or sum(_total(f) for f in facts) <= 0:
        raise PredictError(
            f"{path or 'the events'}: no compute in the kept steps: trace forward / backward / "
            "optimizer as regions of category compute (CPU runs) or capture the GPU's kernels"
        )
    row_of = {
        (int(r), int(s)): i for i, (r, s) in enumerate(table.select("rank", "step").iter_rows())
    }
    col = {c: table[c].to_numpy() for c in ("step_ns", *STALL_COLUMNS)}

    def stall(f: StepFacts, c: str) -> float:
        i = row_of.get((f.rank, f.step))
        return float(col[c][i]) if i is not None else 0.0

    def data_of(f: StepFacts) -> float:
        return stall(f, "data_ns") + stall(f, "data_fetch_ns") + stall(f, "data_prep_ns")

    def own(f: StepFacts) -> float:
        """The rank's own time in its step: all but the communication it was exposed to."""
        exposed = sum(stall(f, c) for c in ("sync_wait_ns", "network_ns", "interconnect_ns"))
        return stall(f, "step_ns") - exposed

    central = central_steps(table)
    used = [f for f in facts if f.step in central] or facts
    # Per central step: the straggler (the rank the others waited for: the most own time)
    # and the typical ranks (the others).
    by_step: dict[int, list[StepFacts]] = {}
    for f in used:
        by_step.setdefault(f.step, []).append(f)
    typical: list[StepFacts] = []
    slow: list[StepFacts] = []
    for group in by_step.values():
        if len(group) < 2:
            typical += group
            continue
        s = max(group, key=lambda f: (own(f), _total(f)))
        slow.append(s)
        typical += [g for g in group if g is not s]
    base = mean(_total(f) for f in typical)
    multi = meta.ranks > 1 and bool(slow) and base > 0

    phases = []
    for ph in PHASES:
        comp = [f.compute.get(ph, 0) for f in typical]
        if max(comp, default=0) <= 0 and ph != "backward":
            continue
        kern = sum(f.kernels.get(ph, 0) for f in typical)
        mm = sum(f.matmul.get(ph, 0) for f in typical)
        mix = {"matmul": mm / kern, "memory": 1 - mm / kern} if gpu and kern > 0 else {"cpu": 1.0}
        if gpu and kern <= 0:
            mix = {"memory": 1.0}
        phases.append(
            Phase(
                phase=ph,
                compute_ns=mean(comp),
                memcpy_ns=mean(f.memcpy.get(ph, 0) for f in typical),
                spread_ns=iqr(f.compute.get(ph, 0) for f in facts),
                mix=mix,
            )
        )
    buckets, bytes_source = _buckets(typical, notes)
    loader = _loader(
        [data_of(f) for f in typical],
        [data_of(f) for f in facts],
        [stall(f, "step_ns") for f in typical],
        meta.loader_period_ns,
    )
    summary = table_summary(table)
    mid = summary["step_median_ns"]
    noise = (summary["step_spread_ns"] + summary["rank_skew_ns"]) / mid if mid else 0.0
    if noise > NOISY_SPREAD:
        notes.append(
            f"the run was noisy: its step times spread {100 * summary['step_spread_ns'] / mid:.0f}"
            f" % of the median step (interquartile range) and its ranks' step windows "
            f"{100 * summary['rank_skew_ns'] / mid:.0f} % (longest less shortest), so its "
            "figures (means over the middle half of the steps) and the predictions carry that "
            "spread; profile on a quieter machine to narrow it"
        )
    measured = Measured(
        ranks=meta.ranks,
        nodes=meta.nodes,
        ranks_per_node=meta.ranks_per_node,
        backend=meta.backend,
        device=meta.device,
        step_ns=summary["step_ns"],
        step_spread_ns=summary["step_spread_ns"],
        step_median_ns=summary["step_median_ns"],
        rank_skew_ns=summary["rank_skew_ns"],
        link_rate_bps=meta.link_rate_bps,
        precision=_precision(facts) if gpu else None,
        stalls_ns={c: summary[c] for c in STALL_COLUMNS},
    )
    if not buckets and not any(f.collectives for f in facts):
        notes.append(
            "no gradient buckets and no collectives: the job's communication is unknown, so "
            "only its own single-rank configuration can be predicted"
        )
    ranks = sorted({f.rank for f in facts})
    per_rank = [
        {
            "rank": r,
            "step_ns": median(stall(f, "step_ns") for f in facts if f.rank == r),
            "compute_ns": median(_total(f) for f in facts if f.rank == r),
        }
        for r in ranks
    ]
    steps = pl.DataFrame(
        [
            {
                "rank": f.rank,
                "step": f.step,
                "central": f.step in central,
                "step_ns": stall(f, "step_ns"),
                "data_ns": stall(f, "data_ns")
                + stall(f, "data_fetch_ns")
                + stall(f, "data_prep_ns"),
                "host_ns": stall(f, "host_ns"),
                **{f"{ph}_ns": float(f.compute.get(ph, 0)) for ph in PHASES},
                "backward_tail_ns": float(f.tail_ns),
                "exposed_comm_ns": stall(f, "sync_wait_ns")
                + stall(f, "network_ns")
                + stall(f, "interconnect_ns"),
                "buckets": len(f.buckets),
            }
            for f in facts
        ]
    )
    return Profile(
        measured=measured,
        phases=phases,
        buckets=buckets,
        collectives=_collectives(typical, meta.ranks),
        loader=loader,
        data_ns=loader.wait_ns,
        host_ns=mean(stall(f, "host_ns") for f in typical),
        backward_tail_ns=mean(f.tail_ns for f in typical),
        bytes_source=bytes_source,
        comm_overlap=1.0 if gpu else _overlap(typical),
        gradient_bytes=sum(b.bytes for b in buckets),
        straggler_factor=max(1.0, mean(_total(f) for f in slow) / base) if multi else 1.0,
        straggler_ranks=1 if multi else 0,
        straggler_data_ns=mean(data_of(f) for f in slow) if multi else None,
        straggler_host_ns=mean(stall(f, "host_ns") for f in slow) if multi else None,
        ranks=per_rank,
        notes=notes,
        source={
            "kind": kind,
            "path": path,
            "ranks": ranks,
            "steps_total": steps_total,
            "steps_used": len(facts),
            "warmup_rule": WARMUP_RULE,
        },
        steps=steps,
    )


def _buckets(typical: list[StepFacts], notes: list[str]) -> tuple[list[Bucket], str]:
    counts = Counter(len(f.buckets) for f in typical if f.buckets)
    if not counts:
        return [], "none"
    n, _ = counts.most_common(1)[0]
    rows = [f for f in typical if len(f.buckets) == n]
    if len(counts) > 1:
        notes.append(
            f"the bucket count varies across steps ({dict(counts)}); the {len(rows)} steps with "
            f"the most common count ({n}) give the buckets"
        )
    out = []
    for k in range(n):
        idx = Counter(f.buckets[k][0] for f in rows).most_common(1)[0][0]
        out.append(
            Bucket(
                index=int(idx),
                bytes=int(median(f.buckets[k][1] for f in rows)),
                ready_ns=mean(f.buckets[k][2] for f in rows),
                ready_spread_ns=iqr(f.buckets[k][2] for f in rows),
                measured_ns=mean(f.buckets[k][3] for f in rows),
            )
        )
    if all(b.bytes == 0 for b in out):
        notes.append(
            "the trace records no bucket events or payload sizes: buckets are the NCCL "
            "all-reduce kernels launched during the backward, each ready when the compute "
            "kernels launched before it ended; their sizes are estimated at prediction time "
            "from their measured times and the measured configuration's link figures"
        )
        return out, "estimated"
    if any(b.bytes == 0 for b in out):
        notes.append(
            "some buckets have no recorded size: theirs are estimated at prediction time from "
            "their measured times"
        )
        return out, "estimated"
    return out, "measured"


def _precision(facts: list[StepFacts]) -> str | None:
    """The precision most matrix-kernel time ran in (as their names state)."""
    total: Counter[str] = Counter()
    for f in facts:
        total.update(f.precision)
    return total.most_common(1)[0][0] if total else None


def _overlap(typical: list[StepFacts]) -> float:
    """CPU runs: 1 - the median share of the compute after a non-last bucket during which its
    all-reduce made no progress (module docstring); 1.0 when no bucket overlapped compute."""
    shares = []
    for f in typical:
        if len(f.buckets) < 2:
            continue
        total = f.compute.get("backward", 0)
        _, last_bytes, _, last_ns = f.buckets[-1]
        if last_bytes <= 0:
            continue
        per_byte = last_ns / last_bytes
        for _, nbytes, ready, measured in f.buckets[:-1]:
            window = total - ready
            if window <= 0:
                continue
            own = nbytes * per_byte
            shares.append(min(1.0, max(0.0, (measured - own) / window)))
    return 1.0 - median(shares) if shares else 1.0


def _collectives(typical: list[StepFacts], world: int) -> list[Collective]:
    counts = Counter(tuple(c[0] for c in f.collectives) for f in typical)
    if not counts:
        return []
    shape, _ = counts.most_common(1)[0]
    rows = [f for f in typical if tuple(c[0] for c in f.collectives) == shape]
    out = []
    for k, name in enumerate(shape):
        cs = [f.collectives[k] for f in rows]
        out.append(
            Collective(
                name=name,
                bytes=int(median(c[1] for c in cs)),
                group_size=Counter(c[2] for c in cs).most_common(1)[0][0] or world,
                phase=Counter(c[3] for c in cs).most_common(1)[0][0],
                offset_ns=mean(c[4] for c in cs),
                blocking=Counter(c[5] for c in cs).most_common(1)[0][0],
                measured_ns=mean(c[6] for c in cs),
            )
        )
    return out


def _loader(
    data: list[float], every: list[float], step: list[float], period_ns: float | None
) -> Loader:
    """The loader seen from the step: ``data``, the typical rank-steps' waits (their mean is
    the wait), ``every``, every kept rank-step's (the floor is their 10th percentile).
    ``period_ns``: the loader's time per batch over its workers when the loader itself was
    traced (else unknown: the wait is then taken as a fixed cost per step, which it is unless
    the loader is what paces the steps)."""
    if not data:
        return Loader(period_ns=period_ns)
    wait = mean(data)
    floor = min(wait, float(np.percentile(np.asarray(every or data, float), 10)))
    bound = wait > max(LOADER_MIN_NS, LOADER_BOUND_SHARE * mean(step))
    return Loader(wait_ns=wait, floor_ns=floor, period_ns=period_ns, loader_bound=bound)
