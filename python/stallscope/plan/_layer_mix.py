"""Models whose layers differ: dense FFN layers among the MoE layers (``Model.dense_layers``:
DeepSeek's and GLM-4.5's first layers, Llama 4's every other one).

Each kind of layer has its own costs (``costs`` of the model, timing an MoE layer, and of
``Model.dense_model()``, timing a dense one). A pipeline chunk's per-layer tasks take the mean
per-layer cost of the layers it holds: the schedule keeps one task per chunk (or per layer
under ZeRO-3) with the chunk's layer count as its multiplier, and the slot values of each
distinct mix of kinds become slots of their own (``task_slots`` and ``mixed_values``: slot
``k`` of mix ``g`` is ``k + len(SLOTS) * g``), so the search's batched makespans and the
single prediction read them as any slot. Once-per-step tasks of a stage's layers (its
optimizer, its gradient reduction) take the stage's mix. Megatron-Core builds the model chunks
in order ``chunk x pp + stage`` (``layout_chunk_layers``), which places each dense layer.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

import numpy as np

from stallscope.plan._costs import Costs
from stallscope.plan._layer import LayerCost
from stallscope.plan._pipeline_split import chunk_layers
from stallscope.plan._schedule import LAYER_SLOTS, SLOTS

if TYPE_CHECKING:
    from stallscope.plan._model import Model
    from stallscope.plan._schedule import Shape
    from stallscope.plan._strategy import Strategy

_LAYER = np.array([n in LAYER_SLOTS for n in SLOTS])


def chunk_dense_layers(model: Model, s: Strategy) -> tuple[tuple[int, ...], ...]:
    """Dense layers of each chunk of each pipeline stage (``[stage][chunk]``), empty when
    every layer is of one kind."""
    if not model.moe or not model.dense_layers:
        return ()
    counts = chunk_layers(model, s)
    dense = set(model.dense_layers)
    out = [[0] * s.interleave for _ in range(s.pp)]
    first = 0
    for v in range(s.interleave):
        for p in range(s.pp):
            n = counts[p][v]
            out[p][v] = sum(1 for i in range(first, first + n) if i in dense)
            first += n
    return tuple(tuple(st) for st in out)


def mixes(shape: Shape) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """The mix group of each chunk (``[stage, chunk]``) and of each stage's once-per-step tasks,
    and each group's (layers, dense layers)."""
    layers = shape.chunk_layers or tuple(
        (n,) * shape.interleave
        for n in (shape.stage_layers or (shape.layers_per_chunk,) * shape.pp)
    )
    groups: dict[tuple[int, int], int] = {}
    per_chunk = np.zeros((shape.pp, shape.interleave), dtype=np.int64)
    per_stage = np.zeros(shape.pp, dtype=np.int64)
    for p in range(shape.pp):
        for v in range(shape.interleave):
            key = (layers[p][v], shape.chunk_dense[p][v])
            per_chunk[p, v] = groups.setdefault(key, len(groups))
        key = (sum(layers[p]), sum(shape.chunk_dense[p]))
        per_stage[p] = groups.setdefault(key, len(groups))
    return per_chunk, per_stage, list(groups)


def task_slots(shape: Shape, slot: np.ndarray, stage: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """Each task's slot in ``mixed_values``' columns: its slot in its chunk's (a once-per-step
    task's: its stage's) mix group; ``slot`` itself when every layer is of one kind."""
    if not shape.chunk_dense:
        return slot
    per_chunk, per_stage, _ = mixes(shape)
    group = np.where(chunk >= 0, per_chunk[stage, np.maximum(chunk, 0)], per_stage[stage])
    out: np.ndarray = slot + len(SLOTS) * group
    return out


def mixed_values(shape: Shape, moe: np.ndarray, dense: np.ndarray) -> np.ndarray:
    """Slot values (``[..., len(SLOTS)]``: per configuration, an MoE layer's and a dense
    layer's) for every mix group (``[..., len(SLOTS) x groups]``): per-layer slots the mean
    over the group's layers, the others the MoE model's."""
    cols = []
    for n, d in mixes(shape)[2]:
        share = d / n if n else 0.0
        cols.append(np.where(_LAYER, (1 - share) * moe + share * dense, moe))
    return np.concatenate(cols, axis=-1)


def blend_costs(moe: Costs, dense: Costs, share: float) -> Costs:
    """The costs of the model's mean layer, ``share`` of the layers dense: every per-layer
    figure (and each compute part) the weighted mean of the two kinds', the rest the MoE
    model's (the embedding, the logits and the whole model's FLOPs are the same in both)."""
    out: dict[str, object] = {}
    for f in fields(moe):
        a, b = getattr(moe, f.name), getattr(dense, f.name)
        if f.name == "flops_per_microbatch" or not isinstance(a, float | int):
            out[f.name] = a
        else:
            out[f.name] = (1 - share) * a + share * b
    if moe.layer is not None and dense.layer is not None:
        out["layer"] = LayerCost(
            tuple((k, (1 - share) * v + share * w) for (k, v), (_, w) in zip(
                moe.layer.f_parts, dense.layer.f_parts, strict=True
            )),
            tuple((k, (1 - share) * v + share * w) for (k, v), (_, w) in zip(
                moe.layer.b_parts, dense.layer.b_parts, strict=True
            )),
        )  # fmt: skip
    return Costs(**out)  # type: ignore[arg-type]
