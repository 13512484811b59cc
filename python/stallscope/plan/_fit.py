"""What to change so that a configuration that does not fit in memory does.

``memory_fixes(model, system, s)`` predicts ``s`` with every combination of the memory savers
it does not use yet, on the same GPUs and global batch:

* a higher ZeRO stage (with more than one data-parallel replica to shard over),
* selective or full activation recompute,
* sequence parallelism (tp > 1),
* a smaller micro-batch (the next smaller divisor of the one given, and 1).

Each row says the command-line change, the memory per GPU of the most loaded stage, whether
it fits and the predicted step: fitting changes first, the fastest first. When even every
saver at once does not fit, ``min_gpus`` gives a lower bound on the GPUs the job needs: the
weights, gradients and optimizer state alone, sharded over every GPU, must fit in their
memory.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import polars as pl

from stallscope.plan._errors import PlanError
from stallscope.plan._memory import GIB
from stallscope.plan._predict import predict_strategy
from stallscope.plan._strategy import check

if TYPE_CHECKING:
    from stallscope.plan._cluster import Cluster
    from stallscope.plan._model import Model
    from stallscope.plan._strategy import Strategy

FIX_SCHEMA = {
    "change": pl.String,
    "changes": pl.Int64,
    "memory_GiB": pl.Float64,
    "fits": pl.Boolean,
    "step_s": pl.Float64,
}


def _axes(model: Model, s: Strategy) -> list[list[tuple[str, dict[str, Any]]]]:
    """Per memory saver, the settings to try: ``s``'s own first (no flag), then each one that
    saves more."""
    keep: tuple[str, dict[str, Any]] = ("", {})
    zero = [keep]
    if s.replicas > 1 or (model.moe and s.expert_replicas > 1):
        zero += [(f"--zero {z}", {"zero": z}) for z in range(s.zero + 1, 4)]
    recompute = [keep]
    if s.recompute == "none":
        recompute.append(("--recompute selective", {"recompute": "selective"}))
    if s.recompute != "full":
        recompute.append(("--recompute full", {"recompute": "full"}))
    sp = [keep]
    if s.tp > 1 and not s.sequence_parallel:
        sp.append(("--sequence-parallel", {"sequence_parallel": True}))
    mb = [keep]
    smaller = [d for d in range(s.micro_batch - 1, 0, -1) if s.micro_batch % d == 0]
    for d in sorted({smaller[0], 1} if smaller else set(), reverse=True):
        mb.append((f"--micro-batch {d}", {"micro_batch": d}))
    return [zero, recompute, sp, mb]


def memory_fixes(model: Model, system: Cluster, s: Strategy) -> pl.DataFrame:
    """``s`` predicted with every combination of the memory savers it lacks (see the module
    doc): columns ``change`` (the command-line flags), ``changes`` (how many), ``memory_GiB``,
    ``fits``, ``step_s``; fitting rows first, the fastest first (the fewest changes on a tie).
    Combinations the model or the stack rule out (a check fails) are left out."""
    rows: list[dict[str, Any]] = []
    for combo in itertools.product(*_axes(model, s)):
        words = [w for w, _ in combo if w]
        if not words:
            continue
        t = s.with_(**{k: v for _, f in combo for k, v in f.items()})
        try:
            check(model, t, s.gpus)
            p = predict_strategy(model, system, t)
        except PlanError:
            continue
        rows.append(
            {
                "change": " ".join(words),
                "changes": len(words),
                "memory_GiB": p.memory.total / GIB,
                "fits": p.memory.fits,
                "step_s": p.step_ns / 1e9,
            }
        )
    # a flag that changes nothing (selective recompute beside flash attention) adds a row
    # with the same memory and step as the combination without it: keep the shorter one
    frame = (
        pl.DataFrame(rows, schema=FIX_SCHEMA)
        .sort("changes", maintain_order=True)
        .unique(
            [pl.col("memory_GiB").round(6), pl.col("step_s").round(9)],
            keep="first",
            maintain_order=True,
        )
    )
    return frame.sort(["fits", "step_s", "changes"], descending=[True, False, False])


def min_gpus(model: Model, system: Cluster, s: Strategy) -> int:
    """A lower bound on the GPUs ``model`` needs under ``s``'s numerics: its weights,
    gradients and optimizer state, sharded over every GPU (ZeRO 3), fill their memory;
    beyond one node, rounded up to whole nodes. Activations and the runtime's own memory
    come on top."""
    per_param = s.weight_bytes + s.grad_bytes + s.optimizer_bytes
    need = math.ceil(model.params() * per_param / (system.device.hbm_GB * GIB))
    node = system.gpus_per_node
    return max(1, need) if need <= node else math.ceil(need / node) * node
