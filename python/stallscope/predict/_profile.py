"""The profile: what the predictor takes from a measured run, as a JSON file a person can read
and edit.

A profile summarises one training job's step on the configuration it was measured on: the
compute of each phase (forward, backward, optimizer, other) on the device or the compute
threads, DDP's gradient buckets (bytes and when each became ready after the backward began),
the other collectives, the data loader's waits and the host time, plus the measured stall table
it must reproduce. Every figure is the mean over the central steps (the middle half of the
steps kept by step time; warm-up excluded by the rule in ``source.warmup_rule``) and, where
ranks differ, over the typical ranks, so the parts compose to the measured step; spreads are the
interquartile range over every kept step. Times are ns, sizes bytes.

File layout (``format`` = "stallscope.predict.profile", ``version`` = 1)::

    {
      "format": ..., "version": 1, "created": ISO-8601 UTC,
      "source": {"kind": "native" | "kineto" | "events", "path": str | null,
                 "ranks": [int], "steps_total": int, "steps_used": int, "warmup_rule": str},
      "measured": {"ranks": int, "nodes": int, "ranks_per_node": int, "backend": str,
                   "device": str, "link_rate_bps": float | null,
                   "network": str | null,  # the link table's name of the network between nodes
                   "precision": "fp32" | "tf32" | "fp16" | "bf16" | "fp8" | "fp4" | null,
                   "step_ns": float, "step_spread_ns": float, "step_median_ns": float,
                   "rank_skew_ns": float, "stalls_ns": {column: ns}},
      "phases": [{"phase": str, "compute_ns": float, "memcpy_ns": float, "spread_ns": float,
                  "mix": {kernel class: share}}],
      "backward_tail_ns": float,   # backward work after its gradients were all-reduced
      "data_ns": float, "host_ns": float,
      "buckets": [{"index": int, "bytes": int, "ready_ns": float, "ready_spread_ns": float,
                   "measured_ns": float}],
      "bytes_source": "measured" | "estimated" | "none",
      "comm_overlap": float,      # share of the link a rank's collectives get while it computes
      "gradient_bytes": int,
      "collectives": [{"name": str, "bytes": int, "group_size": int, "phase": str,
                       "offset_ns": float, "blocking": bool, "measured_ns": float}],
      "loader": {"wait_ns": float, "floor_ns": float, "period_ns": float | null,
                 "loader_bound": bool},
      "straggler": {"factor": float, "ranks": int,
                    "data_ns": float | null, "host_ns": float | null},  # null: as typical
      "ranks": [{"rank": int, "step_ns": float, "compute_ns": float}],
      "notes": [str],
      "steps": [{per rank and step: rank, step, central, step_ns, data_ns, host_ns,
                 <phase>_ns, ...}]
    }
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
import polars as pl

from stallscope.predict._errors import ProfileError

PROFILE_FORMAT: Final = "stallscope.predict.profile"
PROFILE_VERSION: Final = 1
#: Phases of a step's compute, in the order they run.
PHASES: Final[tuple[str, ...]] = ("forward", "backward", "optimizer", "other")


@dataclass
class Phase:
    """One phase's work per step: busy compute (ns; ``mix`` splits it by kernel class, shares
    summing to 1) and copies not hidden by compute (ns)."""

    phase: str
    compute_ns: float
    memcpy_ns: float = 0.0
    spread_ns: float = 0.0
    mix: dict[str, float] = field(default_factory=lambda: {"cpu": 1.0})


@dataclass
class Bucket:
    """A DDP gradient bucket: its all-reduce's payload and when it became ready (ns after the
    backward's compute began)."""

    index: int
    bytes: int
    ready_ns: float
    ready_spread_ns: float = 0.0
    measured_ns: float = 0.0  # its all-reduce as measured (issue to completion)


@dataclass
class Collective:
    """A collective other than DDP's bucket all-reduces, once per step."""

    name: str
    bytes: int
    group_size: int
    phase: str
    offset_ns: float  # issue time after its phase began
    blocking: bool  # the compute waits for it (a synchronous call)
    measured_ns: float = 0.0


@dataclass
class Loader:
    """The data loader as seen from the step: the median wait for a batch, the floor (the
    wait when batches are ready: the hand-over itself) and, when the loader paced the steps,
    its period per batch."""

    wait_ns: float = 0.0
    floor_ns: float = 0.0
    period_ns: float | None = None
    loader_bound: bool = False


@dataclass
class Measured:
    """The configuration the profile was measured on and its stall columns (ns per step)."""

    ranks: int
    nodes: int
    ranks_per_node: int
    backend: str
    device: str
    step_ns: float  # the mean over the central steps (the columns sum to it)
    step_spread_ns: float = 0.0  # interquartile range of the kept steps' times
    step_median_ns: float = 0.0  # their median
    rank_skew_ns: float = 0.0  # per step the longest rank's time less the shortest's (mean)
    link_rate_bps: float | None = None
    # The measured cluster's network between nodes, a link-table name (e.g. "ib-hdr"): prices
    # the measured collectives when their payload sizes must be estimated from their times.
    network: str | None = None
    precision: str | None = None  # of the matrix kernels (most of their time), GPU runs
    stalls_ns: dict[str, float] = field(default_factory=dict)


@dataclass
class Profile:
    """A measured training step, summarised for the simulator (module docstring)."""

    measured: Measured
    phases: list[Phase]
    buckets: list[Bucket] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    loader: Loader = field(default_factory=Loader)
    data_ns: float = 0.0
    host_ns: float = 0.0
    backward_tail_ns: float = 0.0
    bytes_source: str = "measured"
    comm_overlap: float = 1.0
    gradient_bytes: int = 0
    straggler_factor: float = 1.0
    straggler_ranks: int = 0
    # The straggler's own data wait and host time per step (None: the typical ranks').
    straggler_data_ns: float | None = None
    straggler_host_ns: float | None = None
    ranks: list[dict[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)
    steps: pl.DataFrame = field(default_factory=pl.DataFrame)
    created: str = ""

    def phase(self, name: str) -> Phase | None:
        """The phase called ``name``, or None."""
        return next((p for p in self.phases if p.phase == name), None)

    @property
    def noise(self) -> float:
        """How noisy the measured run was: the interquartile range of its step times plus the
        skew of its ranks' step windows, over its median step (0.0 where not measured)."""
        m = self.measured
        mid = m.step_median_ns or m.step_ns
        return (m.step_spread_ns + m.rank_skew_ns) / mid if mid > 0 else 0.0

    @property
    def compute_ns(self) -> float:
        """Busy compute per step over every phase."""
        return sum(p.compute_ns for p in self.phases) + self.backward_tail_ns

    # ---- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        m = self.measured
        return {
            "format": PROFILE_FORMAT,
            "version": PROFILE_VERSION,
            "created": self.created or _now(),
            "source": self.source,
            "measured": {
                "ranks": m.ranks,
                "nodes": m.nodes,
                "ranks_per_node": m.ranks_per_node,
                "backend": m.backend,
                "device": m.device,
                "link_rate_bps": m.link_rate_bps,
                "network": m.network,
                "precision": m.precision,
                "step_ns": m.step_ns,
                "step_spread_ns": m.step_spread_ns,
                "step_median_ns": m.step_median_ns,
                "rank_skew_ns": m.rank_skew_ns,
                "stalls_ns": m.stalls_ns,
            },
            "phases": [vars(p) for p in self.phases],
            "backward_tail_ns": self.backward_tail_ns,
            "data_ns": self.data_ns,
            "host_ns": self.host_ns,
            "buckets": [vars(b) for b in self.buckets],
            "bytes_source": self.bytes_source,
            "comm_overlap": self.comm_overlap,
            "gradient_bytes": self.gradient_bytes,
            "collectives": [vars(c) for c in self.collectives],
            "loader": vars(self.loader),
            "straggler": {
                "factor": self.straggler_factor,
                "ranks": self.straggler_ranks,
                "data_ns": self.straggler_data_ns,
                "host_ns": self.straggler_host_ns,
            },
            "ranks": self.ranks,
            "notes": self.notes,
            "steps": self.steps.to_dicts(),
        }

    def save(self, path: str | Path) -> Path:
        """Write the profile as indented JSON; returns the path."""
        p = Path(path)
        p.write_bytes(orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
        return p

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        """Read a profile file (ProfileError naming the problem when it is not one)."""
        p = Path(path)
        try:
            doc = orjson.loads(p.read_bytes())
        except FileNotFoundError:
            raise ProfileError(f"profile file {p} does not exist") from None
        except orjson.JSONDecodeError as e:
            raise ProfileError(
                f"{p} is not valid JSON ({e}); write a profile with "
                "stallscope.predict.profile_of(run).save(path) or `stallscope predict RUN -o FILE`"
            ) from None
        return cls.from_dict(doc, str(p))

    @classmethod
    def from_dict(cls, doc: Any, source: str = "<profile>") -> Profile:
        """A profile from its JSON form; ProfileError names the field at fault."""
        r = _Reader(doc, source)
        if r.get("format", str) != PROFILE_FORMAT:
            raise ProfileError(
                f"{source} is not a stallscope profile (format {doc.get('format')!r}, expected "
                f"{PROFILE_FORMAT!r}); make one with stallscope.predict.profile_of(run)"
            )
        if r.get("version", int) != PROFILE_VERSION:
            raise ProfileError(
                f"{source} is profile version {doc.get('version')}; this stallscope reads "
                f"version {PROFILE_VERSION}: extract the profile again from the run"
            )
        m = r.sub("measured")
        measured = Measured(
            ranks=m.pos_int("ranks"),
            nodes=m.pos_int("nodes"),
            ranks_per_node=m.pos_int("ranks_per_node"),
            backend=m.get("backend", str),
            device=m.get("device", str),
            step_ns=m.num("step_ns"),
            step_spread_ns=m.num("step_spread_ns", 0.0),
            step_median_ns=m.num("step_median_ns", 0.0),
            rank_skew_ns=m.num("rank_skew_ns", 0.0),
            link_rate_bps=m.opt_num("link_rate_bps"),
            network=m.get("network", str, None) if m.doc.get("network") else None,
            precision=m.get("precision", str, None) if m.doc.get("precision") else None,
            stalls_ns={str(k): float(v) for k, v in m.get("stalls_ns", dict, {}).items()},
        )
        phases = []
        for i, ph in enumerate(r.items("phases")):
            name = ph.get("phase", str)
            if name not in PHASES:
                raise ProfileError(
                    f"{source}: phases[{i}].phase is {name!r}; use one of {', '.join(PHASES)}"
                )
            mix = {str(k): float(v) for k, v in ph.get("mix", dict, {"cpu": 1.0}).items()}
            total = sum(mix.values())
            if not mix or total <= 0 or any(v < 0 for v in mix.values()):
                raise ProfileError(
                    f"{source}: phases[{i}].mix must give non-negative shares per kernel class "
                    f"summing to 1, got {mix}"
                )
            phases.append(
                Phase(
                    phase=name,
                    compute_ns=ph.num("compute_ns"),
                    memcpy_ns=ph.num("memcpy_ns", 0.0),
                    spread_ns=ph.num("spread_ns", 0.0),
                    mix={k: v / total for k, v in mix.items()},
                )
            )
        buckets = [
            Bucket(
                index=b.get("index", int),
                bytes=b.nonneg_int("bytes"),
                ready_ns=b.num("ready_ns"),
                ready_spread_ns=b.num("ready_spread_ns", 0.0),
                measured_ns=b.num("measured_ns", 0.0),
            )
            for b in r.items("buckets", required=False)
        ]
        colls = [
            Collective(
                name=c.get("name", str),
                bytes=c.nonneg_int("bytes"),
                group_size=c.pos_int("group_size"),
                phase=c.get("phase", str),
                offset_ns=c.num("offset_ns"),
                blocking=c.get("blocking", bool),
                measured_ns=c.num("measured_ns", 0.0),
            )
            for c in r.items("collectives", required=False)
        ]
        ld = r.sub("loader", required=False)
        loader = Loader(
            wait_ns=ld.num("wait_ns", 0.0),
            floor_ns=ld.num("floor_ns", 0.0),
            period_ns=ld.opt_num("period_ns"),
            loader_bound=ld.get("loader_bound", bool, False),
        )
        st = r.sub("straggler", required=False)
        steps = doc.get("steps") or []
        return cls(
            measured=measured,
            phases=phases,
            buckets=buckets,
            collectives=colls,
            loader=loader,
            data_ns=r.num("data_ns", 0.0),
            host_ns=r.num("host_ns", 0.0),
            backward_tail_ns=r.num("backward_tail_ns", 0.0),
            bytes_source=r.get("bytes_source", str, "measured"),
            comm_overlap=min(1.0, r.num("comm_overlap", 1.0)),
            gradient_bytes=r.nonneg_int("gradient_bytes", 0),
            straggler_factor=max(1.0, st.num("factor", 1.0)),
            straggler_ranks=st.nonneg_int("ranks", 0),
            straggler_data_ns=st.opt_num("data_ns"),
            straggler_host_ns=st.opt_num("host_ns"),
            ranks=list(doc.get("ranks") or []),
            notes=[str(n) for n in doc.get("notes") or []],
            source=dict(doc.get("source") or {}),
            steps=pl.DataFrame(steps) if steps else pl.DataFrame(),
            created=str(doc.get("created") or ""),
        )


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class _Reader:
    """Typed access to one JSON object of a profile, with errors naming the field."""

    def __init__(self, doc: Any, source: str, where: str = "") -> None:
        if not isinstance(doc, Mapping):
            raise ProfileError(f"{source}: {where or 'the file'} must be a JSON object")
        self.doc, self.source, self.where = doc, source, where

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    _MISSING: Final = object()

    def get(self, key: str, kind: type, default: Any = _MISSING) -> Any:
        v = self.doc.get(key, default)
        if v is _Reader._MISSING:
            raise ProfileError(f"{self.source}: {self._name(key)} is missing")
        ok = isinstance(v, kind) and not (kind is int and isinstance(v, bool))
        if kind is float:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok:
            raise ProfileError(
                f"{self.source}: {self._name(key)} must be a {kind.__name__}, got {v!r}"
            )
        return v

    def num(self, key: str, default: Any = _MISSING) -> float:
        v = float(self.get(key, float, default))
        if not math.isfinite(v) or v < 0:
            raise ProfileError(
                f"{self.source}: {self._name(key)} must be a finite number >= 0, got {v!r}"
            )
        return v

    def opt_num(self, key: str) -> float | None:
        return None if self.doc.get(key) is None else self.num(key)

    def nonneg_int(self, key: str, default: Any = _MISSING) -> int:
        v = int(self.get(key, int, default))
        if v < 0:
            raise ProfileError(f"{self.source}: {self._name(key)} must be >= 0, got {v}")
        return v

    def pos_int(self, key: str) -> int:
        v = int(self.get(key, int))
        if v < 1:
            raise ProfileError(f"{self.source}: {self._name(key)} must be >= 1, got {v}")
        return v

    def sub(self, key: str, required: bool = True) -> _Reader:
        v = self.doc.get(key)
        if v is None and not required:
            v = {}
        if v is None:
            raise ProfileError(f"{self.source}: {self._name(key)} is missing")
        return _Reader(v, self.source, self._name(key))

    def items(self, key: str, required: bool = True) -> list[_Reader]:
        v = self.doc.get(key)
        if v is None and not required:
            return []
        if not isinstance(v, list):
            raise ProfileError(f"{self.source}: {self._name(key)} must be a list")
        return [_Reader(x, self.source, f"{self._name(key)}[{i}]") for i, x in enumerate(v)]
