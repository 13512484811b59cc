"""predict / sweep: a profile and target configurations -> predicted step times and stall
columns, one row per configuration.

The communication model (_comm) comes from a calibration file, a link rate, or both (a
calibration recorded at one rate rescaled to another); the step from the DDP or FSDP simulator
(_ddp, _fsdp) per rank class: the typical ranks and, when the profile measured one, a straggler
whose compute is slower by its factor. Another device scales each phase's compute per kernel
class (_scaling). Predictions far beyond what the profile and link figures support carry a
PredictWarning (once per call, not once per configuration).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import polars as pl

from stallscope.analysis import STALL_COLUMNS
from stallscope.comm._calibration import Calibration
from stallscope.predict._comm import CommModel, Tier
from stallscope.predict._ddp import DdpStep, Key, StepResult
from stallscope.predict._errors import PredictError, PredictWarning
from stallscope.predict._extract import RunArg, profile_of
from stallscope.predict._fsdp import FsdpStep
from stallscope.predict._own_link import SOURCE, fit_own_link
from stallscope.predict._profile import Profile
from stallscope.predict._scaling import phase_scales
from stallscope.predict._target import Target
from stallscope.predict._tiers import Tiers, uses_own_link

#: How far a prediction may reach past its profile before it carries a warning.
MAX_RANK_GROWTH: Final = 16
SIZE_MARGIN: Final = 2.0  # sizes within [min / margin, max * margin] of the calibrated ones

_OPS: Final = {
    "all_gather_into_tensor": "all_gather",
    "_allgather_base": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "all_to_all_single": "all_to_all",
    "send": "send_recv",
    "recv": "send_recv",
    "isend": "send_recv",
    "irecv": "send_recv",
    "barrier": "all_reduce",
}


def op_of(name: str) -> str:
    """The collective a recorded operation name stands for (torch's names -> nccl-tests')."""
    return _OPS.get(name, name)


def nccl_tests_bytes(op: str, payload: int, group: int) -> float:
    """A rank's recorded payload in nccl-tests' size convention: all-gather's is the rank's
    input, nccl-tests counts the whole output."""
    return float(payload * group) if op == "all_gather" else float(payload)


@dataclass
class Prediction:
    """The rows of `predict` and what they rest on."""

    frame: pl.DataFrame
    links: list[str]
    warnings: list[str] = field(default_factory=list)


def _classes(prof: Profile, t: Target) -> list[tuple[str, int]]:
    """The rank classes: the typical ranks and, when the straggler differs from them (its
    compute, or its own data wait or host time, as measured), the straggler."""
    slow = prof.straggler_ranks if t.straggler_ranks is None else t.straggler_ranks
    factor = prof.straggler_factor if t.straggler_factor is None else t.straggler_factor
    slow = min(slow, t.ranks - 1)
    own = (prof.straggler_data_ns or 0.0) > prof.data_ns or (
        prof.straggler_host_ns or 0.0
    ) > prof.host_ns
    if slow <= 0 or (factor <= 1.0 and not own):
        return [("typical", t.ranks)]
    return [("typical", t.ranks - slow), ("straggler", slow)]


def _estimate_bytes(comm: CommModel, op: str, seconds: float, nodes: int, per: int) -> float:
    """The size whose modelled time on the measured configuration is ``seconds`` (bisection:
    the model's time grows with size)."""
    lo, hi = 0.0, 1.0
    while comm.seconds(op, hi, nodes, per) < seconds and hi < 1e15:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if comm.seconds(op, mid, nodes, per) < seconds:
            lo = mid
        else:
            hi = mid
    return hi


class Predictor:
    """Predicts one profile on many targets; keeps the step graphs between them."""

    def __init__(
        self, prof: Profile, calibration: Calibration | None = None, mtu: int = 1500
    ) -> None:
        self.prof = prof
        self.cal = calibration
        self.mtu = mtu
        self.notes: set[str] = set()
        self._steps: dict[tuple[Any, ...], DdpStep | FsdpStep] = {}
        self._sizes: dict[Key, tuple[str, float, int]] | None = None
        self.tiers = Tiers(prof, calibration, mtu, self.notes)
        self.base = self.tiers.base
        if uses_own_link(prof, self.tiers.cal_intra) and (prof.buckets or prof.collectives):
            self.tiers = Tiers(prof, calibration, mtu, self.notes, self._own_link())
            self.base = self.tiers.base

    def _own_link(self) -> Tier | None:
        """The measured run's link within its node, fitted to its exposed transfer."""
        m = self.prof.measured
        t = Target(m.nodes, m.ranks_per_node)
        backend = m.backend

        def exposed(beta: float) -> float:
            comm = CommModel(backend, Tier(0.0, beta, SOURCE), None)
            return self.simulate(t, comm).columns()["interconnect"]

        target = m.stalls_ns.get("interconnect_ns", 0.0)
        return fit_own_link(exposed, target, m.step_ns, self.tiers.own)

    def _sizes_for(self, comm: CommModel) -> dict[Key, tuple[str, float, int]]:
        """Per comm key: (collective, bytes in nccl-tests' convention, measured group size)."""
        if self._sizes is not None:
            return self._sizes
        prof, m = self.prof, self.prof.measured
        out: dict[Key, tuple[str, float, int]] = {}
        estimated = False
        unsized = [b.measured_ns > 0 and b.bytes <= 0 for b in prof.buckets] + [
            c.measured_ns > 0 and nccl_tests_bytes(op_of(c.name), c.bytes, c.group_size) <= 0
            for c in prof.collectives
        ]
        if m.nodes > 1 and comm.inter is None and any(unsized):
            raise PredictError(
                f"the measured run spans {m.nodes} nodes and {sum(unsized)} of its collectives "
                "record no payload size, so their sizes are estimated from their measured times "
                "on the measured cluster's network, which the profile does not name: give it "
                "(`--measured-network NAME`, a link-table name such as ib-hdr; `stallscope "
                "catalog links` lists them), set measured.network in a saved profile (-o), or "
                "give a calibration of the measured cluster"
            )
        for k, b in enumerate(prof.buckets):
            n = float(b.bytes)
            if n <= 0 and b.measured_ns > 0:
                n = _estimate_bytes(
                    comm, "all_reduce", b.measured_ns * 1e-9, m.nodes, m.ranks_per_node
                )
                estimated = True
            out[("bucket", k, 0)] = ("all_reduce", n, m.ranks)
        for j, c in enumerate(prof.collectives):
            op = op_of(c.name)
            n = nccl_tests_bytes(op, c.bytes, c.group_size)
            if n <= 0 and c.measured_ns > 0:
                n = _estimate_bytes(comm, op, c.measured_ns * 1e-9, m.nodes, m.ranks_per_node)
                estimated = True
            out[("coll", j, 0)] = (op, n, c.group_size)
        if estimated:
            self.notes.add(
                "payload sizes the profile lacks were estimated from their measured times on "
                "the measured configuration's link figures"
            )
        self._sizes = out
        return out

    def _check_reach(self, t: Target, comm: CommModel, sizes: Iterable[float]) -> None:
        m = self.prof.measured
        if t.ranks > MAX_RANK_GROWTH * m.ranks:
            self.notes.add(
                f"{t.ranks} ranks is over {MAX_RANK_GROWTH}x the {m.ranks} measured: the "
                "per-rank behaviour (stragglers, data loading, host time) is extrapolated"
            )
        for link in (
            comm.intra if t.ranks_per_node > 1 else None,
            comm.inter if t.nodes > 1 else None,
        ):
            if link is None or link.min_bytes is None or link.max_bytes is None:
                continue
            out = [
                s
                for s in sizes
                if s > 0 and not link.min_bytes / SIZE_MARGIN <= s <= link.max_bytes * SIZE_MARGIN
            ]
            if out:
                self.notes.add(
                    f"message sizes {min(out):,.0f}..{max(out):,.0f} B lie outside the "
                    f"calibrated {link.min_bytes:,}..{link.max_bytes:,} B ({link.source})"
                )

    def _step(self, t: Target, names: tuple[str, ...]) -> DdpStep | FsdpStep:
        key = (t.strategy, t.accumulation, names)
        step = self._steps.get(key)
        if step is None:
            kind = FsdpStep if t.strategy == "fsdp" else DdpStep
            step = kind(self.prof, names, t.accumulation)
            self._steps[key] = step
        return step

    def one(self, t: Target) -> StepResult:
        prof = self.prof
        if t.ranks > 1 and not prof.buckets and not prof.collectives:
            raise PredictError(
                "the profile holds no gradient buckets or collectives, so the job's "
                f"communication on {t.ranks} ranks is unknown: profile a run with 2 or more "
                "ranks (e.g. `stallscope demo --ranks 2`, or stallscope.torch.instrument(model))"
            )
        comm = self.tiers.target(t)
        sizes = self._sizes_for(self.base) if t.ranks > 1 else {}
        self._check_reach(t, comm, (n for _, n, _ in sizes.values()))
        return self.simulate(t, comm)

    def simulate(self, t: Target, comm: CommModel) -> StepResult:
        """The step of ``t`` with the collectives priced by ``comm``."""
        prof = self.prof
        sizes = self._sizes_for(self.base) if t.ranks > 1 else {}
        classes = _classes(prof, t)
        step = self._step(t, tuple(n for n, _ in classes))
        ranks = [n for _, n in classes]
        comm_ns: dict[Key, float] = {}
        for key in step.keys():  # noqa: SIM118 - DdpStep.keys() is a method, not a dict
            comm_ns[key] = self._comm_ns(comm, t, key, sizes)
        base_scale = phase_scales(prof, t)
        factor = prof.straggler_factor if t.straggler_factor is None else t.straggler_factor
        scale = {
            "typical": base_scale,
            "straggler": {ph: s * factor for ph, s in base_scale.items()},
        }
        category = "network" if t.nodes > 1 else "interconnect"
        _, res = step.run(ranks, scale, comm_ns, category)
        period = prof.loader.period_ns
        if period is not None:
            rest = res.step_ns - prof.data_ns
            data = max(prof.loader.floor_ns, period - rest)
            _, res = step.run(ranks, scale, comm_ns, category, data_ns=data)
        return res

    def _comm_ns(
        self, comm: CommModel, t: Target, key: Key, sizes: dict[Key, tuple[str, float, int]]
    ) -> float:
        if t.ranks == 1:
            return 0.0
        what = key[0]
        if what in ("ag", "rs"):  # FSDP: a unit's parameters (its bucket's bytes), gathered
            op = "all_gather" if what == "ag" else "reduce_scatter"
            n = sizes[("bucket", key[1], 0)][1]
            return 1e9 * comm.seconds(op, n, t.nodes, t.ranks_per_node)
        op, n, group = sizes[(what, key[1], 0)]
        measured = self.prof.measured.ranks
        if group >= measured:  # the whole job: every target rank
            nodes, per = t.nodes, t.ranks_per_node
        else:  # a fixed subgroup: packed onto as few nodes as it needs
            per = min(group, t.ranks_per_node)
            nodes = -(-group // per)
        return 1e9 * comm.seconds(op, n, nodes, per)

    def row(self, t: Target, res: StepResult) -> dict[str, Any]:
        cols = res.columns()
        m = self.prof.measured
        thr = t.ranks * t.accumulation / res.step_ns if res.step_ns else 0.0
        thr0 = m.ranks / m.step_ns if m.step_ns else 0.0
        out: dict[str, Any] = {
            "nodes": t.nodes,
            "ranks_per_node": t.ranks_per_node,
            "ranks": t.ranks,
            "rate_bps": t.rate_bps,
            "network": self.tiers.network_of(t),
            "device": t.device or m.device,
            "strategy": t.strategy,
            "accumulation": t.accumulation,
            "step_ns": float(res.step_ns),
            "step_spread_ns": float(res.step_ns) * self.prof.noise,
        }
        for c in STALL_COLUMNS:
            out[c] = float(cols.get(c.removesuffix("_ns"), 0.0))
        out["speedup"] = thr / thr0 if thr0 else None
        return out


def predict(
    run: RunArg | Profile,
    targets: Target | Sequence[Target],
    *,
    calibration: str | Calibration | None = None,
    mtu: int = 1500,
) -> pl.DataFrame:
    """Predicted step and stall columns of ``run`` (a Profile, or anything profile_of takes)
    on each target: one row per target with nodes, ranks_per_node, ranks, rate_bps, device,
    strategy, accumulation, step_ns, step_spread_ns (the measured run's noise, as a share of
    its median step, carried to this step: Profile.noise), the stall table's columns (ns;
    summing to step_ns, averaged over ranks) and speedup (samples per second against the
    measured run's)."""
    return prediction(run, targets, calibration=calibration, mtu=mtu).frame


def prediction(
    run: RunArg | Profile,
    targets: Target | Sequence[Target],
    *,
    calibration: str | Calibration | None = None,
    mtu: int = 1500,
) -> Prediction:
    """`predict` with the link figures it used and its warnings (also issued as
    PredictWarning)."""
    prof = run if isinstance(run, Profile) else profile_of(run)
    cal = _calibration(calibration)
    p = Predictor(prof, cal, mtu)
    given: list[object] = (
        list(targets)
        if isinstance(targets, Sequence) and not isinstance(targets, str)
        else [targets]
    )
    items = [t for t in given if isinstance(t, Target)]
    if len(items) < len(given):
        wrong = next(t for t in given if not isinstance(t, Target))
        raise PredictError(
            f"a target is a Target(nodes, ranks_per_node, ...), got {wrong!r}: e.g. "
            "stallscope.predict.Target(4, 8) for 4 nodes of 8 ranks"
        )
    rows = [p.row(t, p.one(t)) for t in items]
    links: list[str] = []
    for model in p.tiers.used():
        for line in model.describe():
            if line not in links:
                links.append(line)
    for note in sorted(p.notes):
        warnings.warn(note, PredictWarning, stacklevel=3)
    frame = (
        pl.DataFrame(rows, schema=_schema(), orient="row")
        if rows
        else pl.DataFrame(schema=_schema())
    )
    return Prediction(frame, links, sorted(p.notes))


def _schema() -> dict[str, pl.DataType]:
    s: dict[str, pl.DataType] = {
        "nodes": pl.Int64(),
        "ranks_per_node": pl.Int64(),
        "ranks": pl.Int64(),
        "rate_bps": pl.Float64(),
        "network": pl.String(),
        "device": pl.String(),
        "strategy": pl.String(),
        "accumulation": pl.Int64(),
        "step_ns": pl.Float64(),
        "step_spread_ns": pl.Float64(),
    }
    s.update({c: pl.Float64() for c in STALL_COLUMNS})
    s["speedup"] = pl.Float64()
    return s


def _calibration(c: str | Calibration | None) -> Calibration | None:
    if c is None or isinstance(c, Calibration):
        return c
    try:
        return Calibration.load(c)
    except ValueError as e:  # the calibration module's own errors name the file and the fix
        raise PredictError(str(e)) from None


def sweep(
    run: RunArg | Profile,
    *,
    nodes: Iterable[int] = (1,),
    ranks_per_node: Iterable[int] = (1,),
    rates_bps: Iterable[float | None] = (None,),
    calibration: str | Calibration | None = None,
    mtu: int = 1500,
    **target: Any,
) -> pl.DataFrame:
    """`predict` over every combination of nodes, ranks per node and link rates (other Target
    fields, e.g. device, apply to all)."""
    targets = [
        Target(n, g, r, **target)
        for n, g, r in itertools.product(list(nodes), list(ranks_per_node), list(rates_bps))
    ]
    return predict(run, targets, calibration=calibration, mtu=mtu)
