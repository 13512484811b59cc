"""Strategy search: every (tp, pp, dp, micro-batch, recompute, sequence parallel, ZeRO stage,
interleave, pipeline split; expert parallel and expert tensor parallel for a mixture of
experts) that divides the GPUs and fits in memory, simulated and ranked by
step time. The pipeline splits are the even one and Megatron-Core's with the embedding and / or
the loss in a layer's place (``Space.pipeline_split``, ``_pipeline_split.SPLITS``): 126 layers
(Llama 3.1 405B) split over no power-of-two pipeline, 126 + 2 over 8 or 16 stages.

Each configuration's step is the makespan of its pipeline schedule on the engine. Graphs depend
only on the schedule's shape (pp, micro-batches, interleave, layers per chunk, which collectives
exist), so each shape is built once and re-timed natively for all its configurations at once
(``CompiledGraph.makespans``); the top-k are simulated again in full detail for their stall
columns (``predict_strategy``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import polars as pl

from stallscope.plan._cluster import Cluster
from stallscope.plan._costs import model_flops
from stallscope.plan._errors import PlanError, divisors, listed, nearest_values
from stallscope.plan._fit import min_gpus
from stallscope.plan._layer_mix import task_slots
from stallscope.plan._layout import layout
from stallscope.plan._memory import GIB, Memory, memory
from stallscope.plan._model import Model
from stallscope.plan._pipeline_split import (
    SPLITS,
    UNEVEN,
    parse_split_name,
    split_name,
    uneven_split,
)
from stallscope.plan._predict import (
    STALL_COLUMNS,
    Prediction,
    native_graph,
    predict_strategy,
    shape_of,
    step_values,
)
from stallscope.plan._recompute import RECOMPUTE
from stallscope.plan._schedule import Shape, in_flight_counts
from stallscope.plan._stack import DEFAULT_STACK, Stack, load_stack
from stallscope.plan._strategy import Strategy, recompute_fields
from stallscope.predict._compiled import CompiledGraph

#: Tokens per step of the default global batch: about what large models train with (GPT-3
#: 175B: 3.2 M tokens, Brown et al. 2020, table 2.1; Llama 2: 4 M, Touvron et al. 2023).
DEFAULT_BATCH_TOKENS = 4 * 1024 * 1024


def no_fit(
    model: Model, system: Cluster, gpus: int, batch: int, tried: int, s: Strategy, mem: Memory
) -> str:
    """Why a search found nothing that fits: the smallest configuration tried, by how much it
    misses and what holds the most, and what to change."""
    parts = {
        "weights": mem.weights, "gradients": mem.gradients, "optimizer": mem.optimizer,
        "activations": mem.activations, "logits": mem.logits,
    }  # fmt: skip
    big = max(parts, key=lambda k: parts[k])
    shorter = (
        f", shorter sequences (seq_len, --seq-len: {model.seq_len:,} now)"
        if model.seq_len > 8192
        else ""
    )
    least = min_gpus(model, system, s)
    more = (
        f" (the weights, gradients and optimizer state alone need at least {least})"
        if least > gpus
        else ""
    )
    return (
        f"no configuration of {model.name!r} fits on {gpus} x {system.device.name} "
        f"({system.device.hbm_GB:g} GB each) with a global batch of {batch} x "
        f"{model.seq_len:,} tokens among {tried} tried: the smallest, {s.label()}, needs "
        f"{mem.total / GIB:.1f} GiB per GPU, {(mem.total - mem.capacity) / GIB:.1f} GiB over "
        f"(most of it {big}: {parts[big] / GIB:.1f} GiB); add GPUs{more}, a GPU with more "
        f"memory, a smaller batch{shorter}"
    )


def default_global_batch(model: Model) -> int:
    """Sequences per step: about DEFAULT_BATCH_TOKENS, a power of two."""
    return 1 << max(0, round(math.log2(DEFAULT_BATCH_TOKENS / model.seq_len)))


@dataclass(frozen=True)
class Space:
    """What the search may choose."""

    micro_batches: Sequence[int] = (1, 2, 4, 8)
    recompute: Sequence[str] = RECOMPUTE
    #: selective recompute's modules (RECOMPUTE_MODULES; empty: the stack's default)
    recompute_modules: Sequence[str] = ()
    sequence_parallel: Sequence[bool] = (False, True)
    zero: Sequence[int] = (0, 1, 2, 3)
    interleave: Sequence[int] = (1, 2, 4)
    context_parallel: Sequence[int] = (1,)
    #: names of ``_pipeline_split.SPLITS``: the even split, the embedding and / or the loss
    #: as a layer (tried with pp > 1 only), and "uneven": first and last stage counts where
    #: pp does not divide the layers (``uneven_split``)
    pipeline_split: Sequence[str] = ("even", "embedding+loss", UNEVEN)
    max_tp: int = 0  # 0: the GPUs of one node
    #: expert tensor parallel sizes tried for a mixture-of-experts model (0: tp); expert
    #: parallel sizes are every divisor of the experts that the GPUs allow
    expert_tp: Sequence[int] = (1,)
    #: the busiest expert-parallel GPU's routed tokens over the mean, every configuration's
    moe_load: float = 1.0
    precision: str = "bf16"
    stack: str | Stack = DEFAULT_STACK  # the training software every configuration runs on

    def __post_init__(self) -> None:
        names = [*SPLITS, UNEVEN]
        bad = [n for n in self.pipeline_split if n not in names]
        if bad or not self.pipeline_split:
            raise PlanError(
                f"pipeline split {listed(bad) if bad else '(none)'} is not among "
                f"{listed(names)}: name one or more of those"
            )
        if isinstance(self.moe_load, bool) or not (
            isinstance(self.moe_load, int | float) and self.moe_load >= 1
        ):
            raise PlanError(
                f"moe_load {self.moe_load!r}: give the busiest expert-parallel GPU's routed "
                "tokens over the mean, a number >= 1 (1: balanced routing)"
            )
        if not self.context_parallel or any(c < 1 for c in self.context_parallel):
            raise PlanError(
                f"context-parallel sizes {tuple(self.context_parallel)}: give sizes >= 1 "
                "(1: no context parallelism)"
            )


@dataclass
class SearchResult:
    """The ranked table and what the search went through."""

    table: pl.DataFrame
    enumerated: int
    fitting: int
    seconds: float
    best: list[Prediction] = field(default_factory=list)
    stack: str | Stack = DEFAULT_STACK  # the software the configurations run on


def candidates(
    model: Model, gpus: int, global_batch: int, space: Space, gpn: int
) -> Iterator[Strategy]:
    """Every configuration of ``space`` that passes ``check`` for ``gpus`` GPUs."""
    max_tp = space.max_tp or gpn
    splits = [(n, SPLITS[n]) for n in space.pipeline_split if n != UNEVEN]
    uneven = UNEVEN in space.pipeline_split
    # with flash attention, selective recompute of the attention core alone has nothing to
    # recompute: the same as none
    default = load_stack(space.stack).selective_recompute.split("+")
    core_only = set(space.recompute_modules or default) <= {"core_attn"}
    rcs = [
        r for r in space.recompute if not (model.flash_attention and r == "selective" and core_only)
    ]
    modules = tuple(space.recompute_modules)
    for tp in divisors(gpus):
        if tp > max_tp or model.heads % tp or model.kv_heads % tp:
            continue
        if (model.shared_ffn_hidden if model.moe else model.ffn_hidden) % tp:
            continue  # the dense FFN (an MoE layer's shared experts) splits over tp
        if model.dense_layers and model.ffn_hidden % tp:
            continue  # and the dense layers' FFN
        for pp, cp in itertools.product(divisors(gpus // tp), space.context_parallel):
            if (gpus // (tp * pp)) % cp:
                continue
            # (embedding as a layer, loss as a layer, layers per stage) of each split pp allows
            ways: list[tuple[bool, bool, int]] = [
                (e, lo, (model.layers + e + lo) // pp)
                for name, (e, lo) in splits
                if (name == "even" or pp > 1) and (model.layers + e + lo) % pp == 0
            ]
            if uneven and pp > 1 and model.layers % pp:
                ways.append((False, False, 0))  # per v: uneven_split; 0 marks it
            if not ways:
                continue
            if cp > 1 and (not model.flash_attention or model.seq_len % (2 * cp)):
                continue
            dp = gpus // (tp * pp * cp)
            if global_batch % dp:
                continue
            experts = expert_splits(model, tp, tp * cp * dp, space.expert_tp)
            if not experts:
                continue
            for mb in space.micro_batches:
                if (global_batch // dp) % mb:
                    continue
                m = global_batch // (dp * mb)
                for v, (e, lo, per) in itertools.product(space.interleave, ways):
                    ends = uneven_split(model.layers, pp, v) if per == 0 else None
                    if per == 0 and ends is None:
                        continue
                    if v > 1 and (pp == 1 or per % v or m % pp):
                        continue
                    first, last = ends or (None, None)
                    for z in space.zero if dp > 1 else (0,):
                        for sp in space.sequence_parallel if tp > 1 else (False,):
                            if (sp and model.seq_len % tp) or (model.moe and tp > 1 and not sp):
                                continue
                            for rc, (ep, etp) in itertools.product(rcs, experts):
                                yield Strategy(
                                    tp, pp, dp, mb, global_batch, rc, sp, z, v,
                                    space.precision, cp=cp, stack=space.stack,
                                    embedding_as_layer=e, loss_as_layer=lo, ep=ep, etp=etp,
                                    moe_load=min(space.moe_load, ep),
                                    first_stage_layers=first, last_stage_layers=last,
                                    recompute_modules=modules if rc == "selective" else (),
                                )  # fmt: skip


def expert_splits(
    model: Model, tp: int, grid: int, expert_tp: Sequence[int]
) -> list[tuple[int, int]]:
    """The (ep, etp) pairs a pipeline stage of ``grid`` GPUs allows: every ep dividing the
    experts with ep x etp dividing the grid and etp the expert FFN (etp 0: tp); (1, 0) for a
    dense model."""
    if not model.moe:
        return [(1, 0)]
    out = []
    for etp in expert_tp:
        et = etp or tp
        if model.moe_ffn_hidden % et or grid % et:
            continue
        out += [(ep, etp) for ep in divisors(grid // et) if model.experts % ep == 0]
    return out


#: How far from the asked GPU count and batch ``no_split`` looks for ones that split.
_NEAR_GPUS, _NEAR_BATCH = 64, 64


def no_split(model: Model, gpus: int, batch: int, space: Space, gpn: int) -> str:
    """Why no (tp, pp, dp) of ``gpus`` GPUs divides ``model`` and ``batch`` (tensor parallelism
    splits heads, KV heads and the FFN, pipeline parallelism the layers, data parallelism the
    batch into micro-batches of ``space``), and the nearest GPU counts and batches that do."""

    def splits(g: int, b: int) -> bool:
        return next(candidates(model, g, b, space, gpn), None) is not None

    step = gpn if gpus > gpn else 1
    whole = (g for g in range(step, gpus + _NEAR_GPUS * step, step) if g <= gpn or g % gpn == 0)
    counts = [g for g in whole if splits(g, batch)]  # more than a node: whole nodes only
    batches = [
        b for b in range(max(1, batch - _NEAR_BATCH), batch + _NEAR_BATCH) if splits(gpus, b)
    ]
    near = [
        f"{_either(nearest_values(gpus, counts, 2))} GPUs" if counts else "",
        f"a global batch of {_either(nearest_values(batch, batches, 2))}" if batches else "",
    ]
    fix = ", or ".join(x for x in near if x) or "another GPU count or global batch"
    return (
        f"no split of {gpus} GPUs into tensor x pipeline x data parallel degrees divides "
        f"{model.name!r} and a global batch of {batch}: tensor parallelism must divide the "
        f"{model.heads} heads ({model.kv_heads} KV heads) and the FFN's {model.ffn_hidden}, "
        f"pipeline parallelism the {model.layers} layers, data parallelism the batch into "
        f"micro-batches of {listed(space.micro_batches)}. Use {fix}"
    )


def _either(values: list[int]) -> str:
    return " or ".join(str(v) for v in values)


@lru_cache(maxsize=256)
def compiled_schedule(shape: Shape) -> tuple[CompiledGraph, np.ndarray, np.ndarray]:
    """The schedule graph of ``shape`` built natively (the same tasks as ``_schedule.build``),
    with each task's slot and multiplier."""
    a = native_graph(shape)
    cg = CompiledGraph.from_arrays(
        a["stream"],
        len(a["stream_class"]),
        a["dep_ptr"],
        a["dep_idx"],
        a["wait_ptr"],
        a["wait_idx"],
    )
    stage = np.asarray(a["stream_class"])[a["stream"]]
    return cg, task_slots(shape, a["slot"], stage, a["chunk"]), a["mult"]


def search(
    model: Model,
    system: Cluster,
    gpus: int,
    global_batch: int | None = None,
    top: int = 10,
    space: Space | None = None,
) -> SearchResult:
    """Rank every fitting configuration of ``gpus`` GPUs by predicted step time."""
    t0 = time.perf_counter()
    space = space or Space()
    if gpus < 1:
        raise PlanError(f"the job needs at least 1 GPU, got {gpus}")
    if gpus > system.gpus_per_node and gpus % system.gpus_per_node:
        raise PlanError(
            f"{gpus} GPUs do not fill whole nodes of {system.gpus_per_node}: use a multiple, "
            f"e.g. {gpus // system.gpus_per_node * system.gpus_per_node} or "
            f"{(gpus // system.gpus_per_node + 1) * system.gpus_per_node}"
        )
    batch = global_batch or default_global_batch(model)
    cap = system.device.hbm_GB * GIB
    groups: dict[Shape, list[tuple[Strategy, Memory, np.ndarray]]] = defaultdict(list)
    enumerated = fitting = 0
    closest: tuple[Strategy, Memory] | None = None  # the smallest that does not fit
    for s in candidates(model, gpus, batch, space, system.gpus_per_node):
        enumerated += 1
        mem = memory(model, s, cap, in_flight_counts(s.pp, s.micro_batches, s.interleave))
        if not mem.fits:
            if closest is None or mem.total < closest[1].total:
                closest = (s, mem)
            continue
        fitting += 1
        lay = layout(s.tp, s.pp, s.dp, system.gpus_per_node, s.cp, s.ep, s.etp)
        shape = shape_of(model, s, lay, detail=False)
        groups[shape].append((s, mem, step_values(model, s, system, lay, shape)[0]))
    rows: list[dict[str, Any]] = []
    for shape, members in groups.items():
        cg, slot, mult = compiled_schedule(shape)
        ns = np.stack([v for _, _, v in members])
        spans = cg.makespans_by_slot(ns, slot, mult)
        for (s, mem, _), span in zip(members, spans.tolist(), strict=True):
            rows.append(_row(model, system, s, mem, int(span)))
    if not enumerated:
        raise PlanError(no_split(model, gpus, batch, space, system.gpus_per_node))
    if not rows:
        assert closest is not None  # enumerated, none fits
        raise PlanError(no_fit(model, system, gpus, batch, enumerated, *closest))
    table = pl.DataFrame(rows).sort("step_s", "memory_GiB").with_row_index("rank", offset=1)
    best = [
        predict_strategy(model, system, _strategy(r, space.stack))
        for r in table.head(top).iter_rows(named=True)
    ]
    detail = pl.DataFrame(
        [
            {"rank": i + 1, **{c: p.columns()[c] / 1e9 for c in STALL_COLUMNS}}
            for i, p in enumerate(best)
        ]
    ).rename({c: c.removesuffix("_ns") + "_s" for c in STALL_COLUMNS})
    out = table.head(top).join(detail.with_columns(pl.col("rank").cast(pl.UInt32)), on="rank")
    return SearchResult(out, enumerated, fitting, time.perf_counter() - t0, best, space.stack)


def _row(model: Model, system: Cluster, s: Strategy, mem: Memory, step_ns: int) -> dict[str, Any]:
    step = step_ns * 1e-9
    flops = model_flops(model, s.micro_batch) * s.micro_batches * s.dp
    experts = {"ep": s.ep, "etp": s.expert_tp, "moe_load": s.moe_load} if model.moe else {}
    return {
        "tp": s.tp,
        "pp": s.pp,
        "cp": s.cp,
        "dp": s.dp,
        **experts,
        "micro_batch": s.micro_batch,
        "micro_batches": s.micro_batches,
        "recompute": s.recompute_name,
        "sequence_parallel": s.sequence_parallel,
        "zero": s.zero,
        "interleave": s.interleave,
        "split": split_name(s),
        "step_s": step,
        "tokens_per_s": s.global_batch * model.seq_len / step,
        "tokens_per_s_per_gpu": s.global_batch * model.seq_len / step / s.gpus,
        "mfu": flops / (step * s.gpus * system.device.peak(s.precision)),
        "memory_GiB": mem.total / GIB,
        "global_batch": s.global_batch,
        "precision": s.precision,
    }


def _strategy(row: dict[str, Any], stack: str | Stack = DEFAULT_STACK) -> Strategy:
    return Strategy(
        tp=row["tp"],
        pp=row["pp"],
        dp=row["dp"],
        micro_batch=row["micro_batch"],
        global_batch=row["global_batch"],
        **recompute_fields(row["recompute"]),
        sequence_parallel=row["sequence_parallel"],
        zero=row["zero"],
        interleave=row["interleave"],
        precision=row["precision"],
        cp=row["cp"],
        stack=stack,
        **parse_split_name(row["split"]),  # type: ignore[arg-type]
        ep=row.get("ep", 1),
        etp=row.get("etp", 0),
        moe_load=row.get("moe_load", 1.0),
    )


def best_strategy(result: SearchResult) -> Strategy:
    """The configuration of the search's first row."""
    return _strategy(result.table.row(0, named=True), result.stack)
