"""The planner's public functions, in the words of its commands."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from stallscope.plan._cluster import Cluster, load_system
from stallscope.plan._errors import PlanError
from stallscope.plan._model import Model, load_model
from stallscope.plan._pipeline_layout import layout_string
from stallscope.plan._predict import Prediction, predict_strategy
from stallscope.plan._search import SearchResult, Space, search
from stallscope.plan._stack import DEFAULT_STACK, Stack, load_stack
from stallscope.plan._strategy import Strategy, check
from stallscope.plan._whatif import whatif_table

ModelSource = Model | Mapping[str, Any] | str | Path
ClusterSource = Cluster | Mapping[str, Any] | str | Path


def _counts(**values: object) -> None:
    """Each given value a whole number >= 1 (numpy integers too, not bools), else a PlanError
    naming it: the API's callers pass what the CLI's options would have checked."""
    for name, v in values.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1):
            raise PlanError(f"{name} must be a whole number >= 1, got {v!r}")


def _node_size(system: Cluster, gpus_per_node: int | None) -> Cluster:
    """``system`` with ``gpus_per_node`` GPUs used per node (each keeps its NIC share)."""
    if gpus_per_node is None or gpus_per_node == system.gpus_per_node:
        return system
    if not 0 < gpus_per_node <= system.gpus_per_node:
        raise PlanError(
            f"system {system.name!r} has {system.gpus_per_node} GPUs per node: "
            f"--gpus-per-node must be 1 to {system.gpus_per_node}, got {gpus_per_node}"
        )
    share = gpus_per_node / system.gpus_per_node
    return replace(
        system, gpus_per_node=gpus_per_node, inter_node_Gbps=system.inter_node_Gbps * share
    )


def predict_model(
    model: ModelSource,
    system: ClusterSource,
    *,
    nodes: int,
    gpus_per_node: int | None = None,
    tp: int = 1,
    pp: int = 1,
    dp: int | None = None,
    micro_batch: int = 1,
    global_batch: int,
    recompute: str = "none",
    sequence_parallel: bool = False,
    zero: int = 0,
    interleave: int = 1,
    precision: str = "bf16",
    cp: int = 1,
    p2p_overlap: bool = False,
    stack: str | Stack | Mapping[str, Any] = DEFAULT_STACK,
    first_stage_layers: int | None = None,
    last_stage_layers: int | None = None,
    embedding_as_layer: bool = False,
    loss_as_layer: bool = False,
    pipeline_layout: str | Sequence[Sequence[str]] | None = None,
    ep: int = 1,
    etp: int | None = None,
    moe_load: float = 1.0,
    recompute_modules: Sequence[str] = (),
) -> Prediction:
    """Predict one configuration's step: time, throughput, MFU, stall columns, memory.
    ``stack``: the training software (a preset of ``stacks()``, a Stack or a dict of its
    fields). ``first_stage_layers`` / ``last_stage_layers``: the first / last pipeline stage's
    layer count (Megatron's uneven split; the middle stages split the rest evenly).
    ``embedding_as_layer`` / ``loss_as_layer``: the embedding / loss takes one layer's place in
    the pipeline split (Megatron-Core's ``account_for_embedding/loss_in_pipeline_split``).
    ``pipeline_layout``: every chunk's layers in Megatron-Core's notation
    (``--pipeline-model-parallel-layout``, e.g. ``"Et*3|(t*4|)*30,t*3L"``), or its list form
    (one list of LayerType names per chunk); it sets no interleave, give the one it implies.
    ``ep`` / ``etp``: a mixture-of-experts model's expert-parallel and expert tensor-parallel
    sizes (etp None: tp, Megatron-Core's default); ``moe_load``: the busiest expert-parallel
    GPU's routed tokens over the mean (1: balanced routing). ``recompute_modules``: with
    ``recompute="selective"``, Megatron-Core's ``--recompute-modules`` (core_attn, layernorm,
    mla_up_proj, mlp, moe_act, moe, shared_experts) or torchtitan's per-op policy (ops);
    default: the stack's (``Stack.selective_recompute``)."""
    _counts(ep=ep, etp=etp)
    _counts(
        nodes=nodes, gpus_per_node=gpus_per_node, tp=tp, pp=pp, dp=dp, cp=cp,
        micro_batch=micro_batch, global_batch=global_batch, interleave=interleave,
        first_stage_layers=first_stage_layers, last_stage_layers=last_stage_layers,
    )  # fmt: skip
    m, sy = load_model(model), load_system(system)
    sy = _node_size(sy, gpus_per_node)
    gpus = nodes * sy.gpus_per_node
    if nodes < 1:
        raise PlanError(f"nodes must be >= 1, got {nodes}")
    if dp is None:  # the GPUs left; check() words the error when tp x pp does not divide them
        dp = max(1, gpus // (tp * pp * cp))
    s = Strategy(
        tp,
        pp,
        dp,
        micro_batch,
        global_batch,
        recompute,
        sequence_parallel,
        zero,
        interleave,
        precision,
        cp=cp,
        p2p_overlap=p2p_overlap,
        stack=stack if isinstance(stack, str | Stack) else load_stack(stack),
        first_stage_layers=None if first_stage_layers is None else int(first_stage_layers),
        last_stage_layers=None if last_stage_layers is None else int(last_stage_layers),
        embedding_as_layer=embedding_as_layer,
        loss_as_layer=loss_as_layer,
        pipeline_layout=None if pipeline_layout is None else layout_string(pipeline_layout),
        ep=ep,
        etp=0 if etp is None else etp,
        moe_load=moe_load,
        recompute_modules=tuple(recompute_modules),
    )
    check(m, s, gpus)
    return predict_strategy(m, sy, s)


def plan(
    model: ModelSource,
    system: ClusterSource,
    gpus: int,
    *,
    global_batch: int | None = None,
    top: int = 10,
    space: Space | None = None,
) -> SearchResult:
    """Search every configuration of ``gpus`` GPUs; the ``top`` fastest that fit, ranked."""
    _counts(gpus=gpus, global_batch=global_batch, top=top)
    return search(load_model(model), load_system(system), gpus, global_batch, top, space)


def whatif(
    model: ModelSource,
    system: ClusterSource,
    gpus: int,
    *,
    knobs: Mapping[str, Sequence[float]] | None = None,
    global_batch: int | None = None,
    space: Space | None = None,
) -> pl.DataFrame:
    """The best configuration per knob factor (see ``_whatif``)."""
    _counts(gpus=gpus, global_batch=global_batch)
    return whatif_table(load_model(model), load_system(system), gpus, knobs, global_batch, space)
