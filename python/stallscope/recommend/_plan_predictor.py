"""`StepPredictor` on the planner (`stallscope.plan`): a large model never run, on every cloud
configuration, each in the parallel layout that suits it.

A shape (an instance type's GPU, its links, the instance count) becomes a planner system: the
catalog's GPU-to-GPU figure inside an instance, its network figure across instances. The
planner's search then ranks every tensor / pipeline / data-parallel split, micro-batch,
recompute, sequence parallel, ZeRO stage and interleave of the model on those GPUs that fits in
their memory, and the fastest gives the shape's step and its layout (``docs/plan.md``). A shape
on which nothing fits, or whose GPU count no layout divides, gets the planner's reason.

Every shape trains the same global batch of sequences, so the recommender's work converts to
steps alike on all of them: its ``Job`` is one sequence per micro-batch unit
(``batch_size`` 1) and the global batch to keep (``job``). The planner's step columns map onto
the stall table's; the pipeline bubble, time a stage waits on the others, counts as sync wait.

``compute_factors`` (``--anchor`` on the CLI: a system file that ``stallscope predict
--measured-step --save-system`` wrote) runs one GPU's GEMMs and attention at the rate a measured
step of the user's job showed (``stallscope.plan.anchor``); the other GPUs keep the device
model's, and the notes say which GPUs are anchored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from stallscope.analysis import STALL_COLUMNS
from stallscope.recommend._errors import RecommendError
from stallscope.recommend._job import Job
from stallscope.recommend._predictor_seam import PREDICTION_SCHEMA, Shape, failed

#: Inter-node bandwidth given to a one-instance shape without a network figure (Gbit/s): the
#: planner's system needs one, and a job inside one instance never uses it.
_NO_NETWORK_GBPS = 1.0


class PlanPredictor:
    """Predicts a model (``stallscope.plan``'s Model, a preset name, a JSON file or a dict)
    training ``global_batch`` sequences per step on the recommender's shapes."""

    checks_memory = True  # every layout it returns fits in its GPUs' memory

    def __init__(
        self,
        model: Any,
        global_batch: int | None = None,
        precision: str = "bf16",
        stack: Any = None,
        seq_len: int | None = None,
        compute_factors: Mapping[str, float] | None = None,
    ) -> None:
        from stallscope.exceptions import StallscopeError
        from stallscope.plan import DEFAULT_STACK, Space, load_model
        from stallscope.plan._search import default_global_batch

        try:
            m = load_model(model)
            if seq_len is not None:
                m = load_model(m.to_dict() | {"seq_len": seq_len})
            self.space = Space(precision=precision, stack=stack or DEFAULT_STACK)
        except StallscopeError as e:
            raise RecommendError(str(e)) from None
        if global_batch is not None and (isinstance(global_batch, bool) or global_batch < 1):
            raise RecommendError(f"global_batch must be a whole number >= 1, got {global_batch!r}")
        self.model = m
        self.global_batch = int(global_batch or default_global_batch(m))
        self.batch_given = global_batch is not None
        self.precision = precision
        self.compute_factors = _factors(compute_factors or {})
        self.calls = 0
        self._memo: dict[tuple[object, ...], dict[str, Any]] = {}

    @property
    def job(self) -> Job:
        """The recommender's job: a global batch of sequences of the model's length."""
        return Job(batch_size=1, global_batch=self.global_batch, seq_len=self.model.seq_len)

    @property
    def measured_ranks(self) -> int:
        return 1  # not a measured run: the work is counted in global batches (``job``)

    @property
    def measured_device(self) -> str:
        return ""

    @property
    def basis(self) -> str:
        m = self.model
        return (
            f"the planner (docs/plan.md): {m.name} ({m.params() / 1e9:.1f} B parameters) at "
            f"{self.precision}, global batch {self.global_batch} x {m.seq_len:,} tokens"
            + ("" if self.batch_given else " (the model's default: --global-batch sets it)")
            + ", each configuration in the fastest parallel layout that fits in its GPUs' "
            "memory, GPUs timed by the planner's device model"
            + "".join(
                f"; {g}'s GEMMs and attention at {f:.3f} x its rate (anchored on a measured step)"
                for g, f in sorted(self.compute_factors.items())
            )
            + ("; the other GPUs not anchored" if self.compute_factors else "")
        )

    @property
    def predictor_notes(self) -> list[str]:
        from stallscope.plan._accuracy import accuracy_note

        note = accuracy_note(None, self.model.moe)
        return [f"{self.calls} planner search(es)"] + ([note] if note else [])

    def compute_scale(self, device: str) -> float:
        raise RecommendError(
            "a mix of two instance types needs a measured run: the planner plans one GPU type "
            "per job (leave out --mix)"
        )

    def predict(self, shapes: Sequence[Shape]) -> pl.DataFrame:
        """One row per shape (PREDICTION_SCHEMA): the fastest fitting layout's step, or the
        planner's reason that there is none."""
        rows = [self._one(s) for s in shapes]
        if not rows:
            return pl.DataFrame(schema=PREDICTION_SCHEMA)
        return pl.concat(
            [failed(r["problem"]) if r["problem"] else _row(r) for r in rows], how="vertical"
        )

    def _one(self, s: Shape) -> dict[str, Any]:
        key = (s.device, s.nodes, s.ranks_per_node, s.intra_node_GBps, s.network_gbps,
               s.compute_scale)  # fmt: skip
        if key not in self._memo:
            self._memo[key] = self._search(s)
        return self._memo[key]

    def _search(self, s: Shape) -> dict[str, Any]:
        from stallscope.plan import PlanError, load_system
        from stallscope.plan._search import search

        if s.compute_scale is not None:
            return {"problem": "the planner times one GPU type per job, not a mix"}
        self.calls += 1
        net = s.network_gbps if s.network_gbps else _NO_NETWORK_GBPS
        try:
            system = load_system(
                {
                    "name": f"{s.nodes} x {s.ranks_per_node} {s.device}",
                    "gpu": s.device,
                    "gpus_per_node": s.ranks_per_node,
                    "intra_node_GBps": s.intra_node_GBps,
                    "inter_node_Gbps": net,
                    "compute_factor": self.compute_factors.get(s.device, 1.0),
                }
            )
            found = search(self.model, system, s.ranks, self.global_batch, 1, self.space)
        except PlanError as e:
            return {"problem": str(e)}
        best = found.best[0]
        return {"problem": None, "columns": best.columns(), "step_ns": best.step_ns,
                "layout": best.strategy.label()}  # fmt: skip


def _factors(given: Mapping[str, float]) -> dict[str, float]:
    """The compute factors by the device table's GPU names (each a positive number)."""
    from stallscope.exceptions import CatalogError
    from stallscope.recommend._gpu_lookup import gpu_device

    out: dict[str, float] = {}
    for gpu, f in given.items():
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f < float("inf"):
            raise RecommendError(
                f"the compute factor of {gpu} must be a positive number, got {f!r}"
            )
        try:
            out[gpu_device(gpu).name] = float(f)
        except CatalogError as e:
            raise RecommendError(f"compute factor: {e}") from None
    return out


def anchor_factors(paths: Sequence[str | Path]) -> dict[str, float]:
    """{GPU: compute factor} of anchored system files (``stallscope predict --measured-step
    --save-system``)."""
    from stallscope.plan import PlanError
    from stallscope.plan._cluster import system_doc

    out: dict[str, float] = {}
    for path in paths:
        try:
            doc, _ = system_doc(Path(path))
        except PlanError as e:
            raise RecommendError(f"anchor {path}: {e}") from None
        if "gpu" not in doc or "compute_factor" not in doc:
            raise RecommendError(
                f"anchor {path}: a system file with gpu and compute_factor, as `stallscope "
                "predict ... --measured-step S --save-system FILE` writes, is needed"
            )
        out[str(doc["gpu"])] = doc["compute_factor"]
    return out


def _row(r: dict[str, Any]) -> pl.DataFrame:
    cols = dict(r["columns"])
    cols["sync_wait_ns"] = cols.get("sync_wait_ns", 0) + cols.pop("bubble_ns", 0)
    row: dict[str, Any] = {"step_ns": float(r["step_ns"])}
    row |= {c: float(cols.get(c, 0)) for c in STALL_COLUMNS}
    row |= {"layout": r["layout"], "problem": None}
    return pl.DataFrame([row], schema=PREDICTION_SCHEMA, orient="row")
