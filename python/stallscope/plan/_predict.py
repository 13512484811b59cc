"""One configuration's predicted step: the schedule simulated on the event engine, its stall
columns per pipeline stage, throughput, MFU and memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from stallscope import _core
from stallscope.plan._cluster import Cluster
from stallscope.plan._costs import Costs, costs
from stallscope.plan._layer_mix import blend_costs, chunk_dense_layers, mixed_values, task_slots
from stallscope.plan._layout import Layout, layout
from stallscope.plan._memory import GIB, Memory, memory
from stallscope.plan._model import Model
from stallscope.plan._pipeline_split import chunk_layers
from stallscope.plan._schedule import (
    SLOTS,
    Schedule,
    Shape,
    in_flight_counts,
    scale_stages_array,
)
from stallscope.plan._strategy import Strategy, check
from stallscope.predict._compiled import CompiledGraph, attribute_classes
from stallscope.predict._engine import CATEGORIES, Graph, Stream

#: The stall columns of a prediction, in the stall table's order plus the pipeline bubble.
STALL_COLUMNS: tuple[str, ...] = tuple(f"{c}_ns" for c in CATEGORIES)


@dataclass(frozen=True)
class Prediction:
    model: Model
    system: Cluster
    strategy: Strategy
    step_ns: int
    stages: list[dict[str, int]]  # per pipeline stage: its stall columns (ns), summing to the step
    memory: Memory
    costs: Costs | None = None  # the per-micro-batch costs the step was simulated from

    @property
    def tokens_per_s(self) -> float:
        s = self.strategy
        return s.global_batch * self.model.seq_len / (self.step_ns * 1e-9)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.strategy.gpus

    @property
    def model_flops(self) -> float:
        """Model FLOPs of one step (forward + backward, no recompute)."""
        from stallscope.plan._costs import model_flops

        s = self.strategy
        return model_flops(self.model, s.micro_batch) * s.micro_batches * s.dp

    @property
    def mfu(self) -> float:
        peak = self.system.device.peak(self.strategy.precision)
        return self.model_flops / (self.step_ns * 1e-9 * self.strategy.gpus * peak)

    @property
    def tflops_per_gpu(self) -> float:
        return self.model_flops / (self.step_ns * 1e-9 * self.strategy.gpus) / 1e12

    def columns(self) -> dict[str, int]:
        """The stall columns of an average GPU (the mean over stages; host takes the rounding),
        summing to step_ns."""
        k = len(self.stages)
        out = {c: round(sum(st[c] for st in self.stages) / k) for c in STALL_COLUMNS}
        out["host_ns"] += self.step_ns - sum(out.values())
        return out

    def parts(self) -> pl.DataFrame:
        """Where the step goes (``_breakdown``): the compute by part (each GEMM of a layer,
        attention, element-wise, recompute, embedding and logits, optimizer), the exposed
        communication, the bubble; ``part``, ``seconds``, ``share``, summing to the step."""
        from stallscope.plan._breakdown import breakdown

        c = self.costs or costs(self.model, self.strategy, self.system)
        return breakdown(self, c)

    def layer(self) -> pl.DataFrame:
        """One transformer layer for one micro-batch on one GPU (``_breakdown.layer_breakdown``):
        ``part``, ``forward_s``, ``backward_s``, summing to the layer's forward and backward;
        of a model that mixes dense and MoE layers, its MoE layer."""
        from stallscope.plan._breakdown import layer_breakdown

        return layer_breakdown(costs(self.model, self.strategy, self.system))

    def memory_fixes(self) -> pl.DataFrame:
        """The memory savers that make this configuration fit on its GPUs, each combination
        predicted (``_fit.memory_fixes``): ``change``, ``changes``, ``memory_GiB``, ``fits``,
        ``step_s``, fitting rows first, the fastest first."""
        from stallscope.plan._fit import memory_fixes

        return memory_fixes(self.model, self.system, self.strategy)

    def min_gpus(self) -> int:
        """A lower bound on the GPUs the model needs (``_fit.min_gpus``): its weights,
        gradients and optimizer state sharded over every GPU fill their memory."""
        from stallscope.plan._fit import min_gpus

        return min_gpus(self.model, self.system, self.strategy)

    def to_dict(self) -> dict[str, Any]:
        m = self.memory
        lay = self.layer()
        return {
            "model": self.model.name,
            "system": self.system.name,
            "gpus": self.strategy.gpus,
            **self.strategy.to_dict(),
            "micro_batches": self.strategy.micro_batches,
            "step_ns": self.step_ns,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            **self.columns(),
            "memory_bytes": m.total,
            "memory_parts_bytes": m.parts(),
            "memory_capacity_bytes": m.capacity,
            "memory_stage": m.stage,
            "fits": m.fits,
            "memory_shortfall": m.shortfall(),
            "stages": self.stages,
            "layer_ns": {
                "forward": round(float(lay["forward_s"].sum()) * 1e9),
                "backward": round(float(lay["backward_s"].sum()) * 1e9),
                "parts": {
                    r["part"]: [round(r["forward_s"] * 1e9), round(r["backward_s"] * 1e9)]
                    for r in lay.iter_rows(named=True)
                },
            },
        }


def shape_of(model: Model, s: Strategy, lay: Layout, detail: bool) -> Shape:
    def net(nodes: int) -> str:
        return "network" if nodes > 1 else "interconnect"

    chunks = chunk_layers(model, s)
    uneven_chunks = any(len(set(c)) > 1 for c in chunks)
    per_chunk = [c[0] for c in chunks]  # each stage's (chunks alike unless uneven_chunks)
    return Shape(
        pp=s.pp,
        micro_batches=s.micro_batches,
        interleave=s.interleave,
        layers_per_chunk=max(max(c) for c in chunks),
        zero3=s.zero == 3 and s.replicas > 1,
        dp_overlap=s.replicas > 1 and s.zero < 3,
        dp_blocking=not s.software.dp_overlap,
        gather_after_backward=s.software.fsdp_backward_prefetch == "post",
        tied=model.tied_embeddings,  # one embedding matrix: no separate output layer
        param_gather=s.zero in (1, 2) and s.replicas > 1,
        detail=detail,
        p2p_blocking=s.pp > 1 and not s.overlaps_p2p,
        # the layer's communication: TP collectives, and an MoE layer's all-to-alls, which
        # cross the network when the expert-parallel group spans nodes
        tp_cat=net(max(lay.tp.nodes, lay.ep.nodes if model.moe else 1)),
        send_cat="network" if lay.pp_cross_node else "interconnect",
        dp_cat=net(lay.dp.nodes),
        stage_layers=tuple(per_chunk) if len(set(per_chunk)) > 1 and not uneven_chunks else (),
        chunk_layers=chunks if uneven_chunks else (),
        chunk_dense=chunk_dense_layers(model, s),
    )


def slot_values(c: Costs) -> dict[str, float]:
    v = {
        k: getattr(c, k)
        for k in c.__dataclass_fields__
        if k not in ("flops_per_microbatch", "layer")
    }
    v["f"] = c.f_comp + c.f_tp
    v["b"] = c.b_comp + c.b_tp
    return v


def slot_array(c: Costs) -> np.ndarray:
    """``slot_values`` in ns, in ``SLOTS`` order."""
    v = slot_values(c)
    return np.array([v.get(n, 0.0) for n in SLOTS]) * 1e9


def step_values(
    model: Model, s: Strategy, system: Cluster, lay: Layout, shape: Shape
) -> tuple[np.ndarray, Costs, Costs | None]:
    """The slot values of ``shape``'s tasks in ns (``task_slots`` indexes them), the costs
    of the model's layer and, with dense layers among the MoE ones, of a dense layer (whose
    mix with the MoE layer's the values hold per chunk: ``_layer_mix``)."""
    c = costs(model, s, system, lay)
    if not shape.chunk_dense:
        return slot_array(c), c, None
    cd = costs(model.dense_model(), s, system, lay)
    return mixed_values(shape, slot_array(c), slot_array(cd)), c, cd


def _category(shape: Shape) -> list[str]:
    """What each slot's task counts as in the stall columns."""
    cat = dict.fromkeys(SLOTS, "compute")
    cat |= {"f_tp": shape.tp_cat, "b_tp": shape.tp_cat, "send": shape.send_cat}
    cat |= dict.fromkeys(
        ("zero_ag", "zero_rs", "dp_layer", "dp_embed", "param_ag_layer", "param_ag_embed"),
        shape.dp_cat,
    )
    cat["tied_embed"] = shape.dp_cat
    return [cat[n] for n in SLOTS]


def native_graph(shape: Shape) -> dict[str, Any]:
    """The native pipeline graph's arrays of ``shape`` (``_core.pipeline_graph``), per-layer
    multipliers scaled to each stage's and chunk's own layer count (``scale_stages``)."""
    a: dict[str, Any] = _core.pipeline_graph(
        shape.pp,
        shape.micro_batches,
        shape.interleave,
        shape.layers_per_chunk,
        shape.zero3,
        shape.dp_overlap,
        shape.tied,
        shape.param_gather,
        shape.detail,
        shape.p2p_blocking,
        shape.dp_blocking,
        shape.gather_after_backward,
    )
    if shape.scaled:
        stage = np.asarray(a["stream_class"])[a["stream"]]
        a["mult"] = scale_stages_array(shape, a["slot"], stage, a["chunk"], a["mult"])
    return a


def native_schedule(shape: Shape) -> Schedule:
    """``_schedule.build(shape)`` built natively (tests hold the two equal): a Graph whose
    labels are the slot names."""
    a = native_graph(shape)
    names = ["compute", "send", "dp", *(("zero_ag", "zero_rs") if shape.zero3 else ())]
    cats = _category(shape)
    slot = a["slot"].tolist()
    dp_, di = a["dep_ptr"].tolist(), a["dep_idx"].tolist()
    wp, wi = a["wait_ptr"].tolist(), a["wait_idx"].tolist()
    n = len(slot)
    g = Graph(
        streams=[Stream(nm, k) for k in range(shape.pp) for nm in names],
        classes=[(f"stage {k}", 1) for k in range(shape.pp)],
        stream_of=a["stream"].tolist(),
        duration=[0] * n,
        deps=[tuple(di[dp_[i] : dp_[i + 1]]) for i in range(n)],
        wait_on=[tuple(wi[wp[i] : wp[i + 1]]) for i in range(n)],
        wait_as=["bubble"] * n,
        category=[cats[x] for x in slot],
        label=[SLOTS[x] for x in slot],
        nbytes=[0] * n,
    )
    stage = np.asarray(a["stream_class"])[a["stream"]].tolist()
    sch = Schedule(shape, g, slot, a["mult"].tolist(), a["chunk"].tolist(), stage)
    sch.in_flight = in_flight_counts(shape.pp, shape.micro_batches, shape.interleave)
    return sch


def predict_strategy(model: Model, system: Cluster, s: Strategy) -> Prediction:
    """Simulate one configuration (checked first: bad input raises PlanError)."""
    check(model, s, None)
    lay = layout(s.tp, s.pp, s.dp, system.gpus_per_node, s.cp, s.ep, s.etp)
    shape = shape_of(model, s, lay, detail=True)
    sch = native_schedule(shape)
    g = sch.graph
    values, c, cd = step_values(model, s, system, lay, shape)
    at = task_slots(shape, np.array(sch.slot), np.array(sch.stage), np.array(sch.chunk))
    g.duration[:] = np.rint(values[at] * np.array(sch.mult)).astype(np.int64).tolist()
    if cd is not None:  # the breakdown's layer: the mean of the model's layers
        c = blend_costs(c, cd, len(model.dense_layers) / model.layers)
    timeline = CompiledGraph.of(g).run()
    step = timeline.makespan
    stages = [
        {f"{k}_ns": v for k, v in cols.items()}
        for cols in attribute_classes(timeline, list(range(s.pp)), step)
    ]
    mem = memory(model, s, system.device.hbm_GB * GIB, sch.in_flight)
    return Prediction(model, system, s, step, stages, mem, c)
