"""A published run of bench/data/public_llm_training.json as the planner's inputs, and its
prediction (``predict_entry``), for ``predict_public.py`` and ``predict_layer.py``.

Each published result is turned into a step time with the source's own definition
(``measured_step_s``):

* step_time_s as given; tokens_per_s: global_batch x seq_len / tokens_per_s; tokens_per_s_per_gpu:
  the same over the GPUs;
* tflops_per_gpu of Narayanan et al. (SC'21, Table 1): their FLOP count with full recomputation,
  96 B s l h^2 (1 + s / 6h + V / 16 l h), over the GPUs;
* tflops_per_gpu with ``mfu_basis`` formula ``palm`` (the Llama 3 paper's Table 4): model FLOPs
  as PaLM defines them (Chowdhery et al. 2022, Appendix B), 6N + 12 L H Q T per token with N the
  parameters, over the GPUs.

Fields neither the source nor its configuration states (micro-batch, interleave, recompute,
sequence parallel, ZeRO stage) are the planner's choice: the fastest configuration that fits
with everything stated held fixed (``interleaved``: the source states an interleaved schedule
without its number of chunks, so only interleaves above 1 are tried). Model details the presets do not carry follow the framework of
the run: Megatron-LM and Megatron-DeepSpeed 2021-2022 (Narayanan, Korthikanti, Megatron-LM's
GPT-3 example, MT-NLG, BLOOM): unfused attention (the stack) with dropout 0.1 (the frameworks'
defaults); the 2024-25 stacks (NeMo / Megatron-Core with Transformer Engine, torchtitan,
llm-foundry): flash attention, no dropout unless the entry's configuration keeps it
(``dropout``: NeMo's GPT-3 configurations, 0.1). Entries without a system preset (llm-foundry's
tables, BLOOM, Llama 3) run on DGX-like nodes: 8 GPUs on NVSwitch, 1600 Gb/s per A100 node (as
llm-foundry's table heading states) and 3200 Gb/s per H100 node (Llama 3: 400 Gb/s per GPU),
unless the entry gives its own ``inter_node_Gbps`` (BLOOM: 4 x 100 Gb/s Omni-Path per node).
A pipeline whose first and last stages hold fewer layers gives them as ``first_stage_layers`` /
``last_stage_layers`` (Megatron's uneven split: the middle stages share the rest evenly); one
whose embedding and loss each take a layer's place in the split (Megatron-Core's
``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``) gives
``embedding_as_layer`` / ``loss_as_layer``. Under interleaving, which Megatron-Core's rule for
uneven first and last stages refuses, an uneven split is written as a pipeline layout
(``end_chunk_layout``): the first (last) stage's missing layers come off the chunk holding the
embedding (the loss), where Megatron-Core's account_for_* options put them.
Entries on a GPU whose dense peak is not published, and entries no configuration of the planner
can express, are reported with the reason and not counted (``predict_entry``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from stallscope.plan import (
    PlanError,
    Prediction,
    Stack,
    Strategy,
    load_model,
    load_stack,
    load_system,
    predict_strategy,
)
from stallscope.plan._cluster import Cluster
from stallscope.plan._memory import RESERVED_BYTES, memory
from stallscope.plan._model import Model
from stallscope.plan._pipeline_layout import write_layout
from stallscope.plan._schedule import in_flight_counts
from stallscope.plan._strategy import check

DATA = Path(__file__).parent / "data" / "public_llm_training.json"
#: Runs on Megatron-LM or Megatron-DeepSpeed before flash attention, whose models keep the
#: frameworks' default dropout of 0.1 (--attention-dropout, --hidden-dropout).
FRAMEWORK_2021 = ("narayanan21", "korthikanti22", "megatronlm2101", "smith22", "bigscience22")


def model_of(e: dict[str, Any]) -> Model:
    m = load_model(e["model"])
    flash = stack_of(e).attention != "unfused"
    old = e["id"].startswith(FRAMEWORK_2021)
    dropout = old or bool(e.get("dropout"))
    d = m.to_dict() | {"seq_len": e["seq_len"], "flash_attention": flash, "dropout": dropout}
    return load_model(d)


def cluster_of(e: dict[str, Any]) -> tuple[Cluster, str]:
    if e.get("system"):
        return load_system(e["system"]), ""
    h100 = e["gpu"].startswith("H100")
    doc = {
        "name": f"{e['gpu']} nodes",
        "gpu": e["gpu"],
        "gpus_per_node": e["gpus_per_node"],
        "intra_node_GBps": 450 if h100 else 300,
        "inter_node_Gbps": e.get("inter_node_Gbps") or (3200 if h100 else 1600),
    }
    note = "no system preset: NVSwitch nodes, " + (
        f"{e['inter_node_Gbps']} Gb/s per node (the entry's fabric)"
        if e.get("inter_node_Gbps")
        else "3200 Gb/s per node assumed"
        if h100
        else "1600 Gb/s per node (the table's heading)"
    )
    return load_system(doc), note


def measured_step_s(e: dict[str, Any], m: Model) -> float:
    r, gb, s = e["result"], e["global_batch"], e["seq_len"]
    if r.get("step_time_s"):
        return float(r["step_time_s"])
    if r.get("tokens_per_s"):
        return gb * s / r["tokens_per_s"]
    if r.get("tokens_per_s_per_gpu"):
        return gb * s / (r["tokens_per_s_per_gpu"] * e["gpus"])
    if r.get("tflops_per_gpu") and e["id"].startswith("narayanan21"):
        h, n_l, v = m.hidden, m.layers, m.vocab
        flops = 96 * gb * s * n_l * h * h * (1 + s / (6 * h) + v / (16 * n_l * h))
        return flops / (r["tflops_per_gpu"] * 1e12 * e["gpus"])
    if r.get("tflops_per_gpu") and (e.get("mfu_basis") or {}).get("formula") == "palm":
        per_token = 6 * m.params() + 12 * m.layers * m.heads * m.head_dim * s
        return gb * s * per_token / (r["tflops_per_gpu"] * 1e12 * e["gpus"])
    raise ValueError(f"{e['id']}: no result the bench can turn into a step time")


def stack_of(e: dict[str, Any]) -> Stack:
    """The run's training software: its preset, where it departs from it, and the token
    dispatcher its mixture of experts runs (the entry's ``moe_dispatcher``)."""
    doc = {k: v for k, v in e["stack"].items() if k != "source"}
    if e.get("moe_dispatcher"):
        doc["moe_dispatcher"] = e["moe_dispatcher"]
    return load_stack(doc)


def end_chunk_layout(layers: int, pp: int, v: int, first: int | None, last: int | None) -> str:
    """An uneven split under interleaving as a pipeline layout: every chunk of the middle
    stages holds the same share, and the first (last) stage's missing layers come off its
    chunk that holds the embedding (the loss), as Megatron-Core's account_for_embedding /
    loss_in_pipeline_split place them ("" when that cannot be written)."""
    middle = pp - (first is not None) - (last is not None)
    rest = layers - (first or 0) - (last or 0)
    if middle < 1 or rest % middle or rest // middle % v:
        return ""
    each = rest // middle // v
    counts = [[each] * v for _ in range(pp)]
    for stage, chunk, n in ((0, 0, first), (pp - 1, v - 1, last)):
        if n is not None:
            counts[stage][chunk] -= v * each - n
    if any(c < 0 or c > each for st in counts for c in st):
        return ""
    order = [counts[i % pp][i // pp] for i in range(pp * v)]
    chunks = ["t" * n for n in order]
    chunks[0], chunks[-1] = "E" + chunks[0], chunks[-1] + "L"
    return write_layout(chunks)


def choices(e: dict[str, Any], m: Model) -> tuple[list[Strategy], str]:
    """Every configuration consistent with what the source states, and the planner's reason
    for refusing the first one it refuses ("" when it refuses none)."""
    st = stack_of(e)
    tp, pp, dp = e["tp"], e["pp"], e["dp"]
    mbs = [e["micro_batch"]] if e.get("micro_batch") else [1, 2, 4, 8]
    first, last = e.get("first_stage_layers"), e.get("last_stage_layers")
    emb, loss = bool(e.get("embedding_as_layer")), bool(e.get("loss_as_layer"))
    if e.get("virtual_stages"):
        vs = [e["virtual_stages"]]
    elif first is not None or last is not None or emb or loss:
        vs = [1, 2, 3, 4, 6, 8]  # check() refuses those Megatron-Core's rule refuses
    elif pp > 1:
        # No even split at all: try v = 1 so that the planner's check says why.
        vs = [v for v in (1, 2, 3, 4, 6, 8) if m.layers % (pp * v) == 0] or [1]
    else:
        vs = [1]
    if e.get("interleaved"):  # the source states an interleaved schedule, not its V
        vs = [v for v in vs if v > 1] or [2]
    rcs = [e["recompute"]] if e.get("recompute") else ["none", "selective", "full"]
    sps = [e["sequence_parallel"]] if e.get("sequence_parallel") is not None else [tp > 1]
    zs = [e["zero_stage"]] if e.get("zero_stage") is not None else [0, 1]
    out: list[Strategy] = []
    why = ""
    for mb, v, rc, sp, z in itertools.product(mbs, vs, rcs, sps, zs):
        split: dict[str, Any] = {
            "first_stage_layers": first, "last_stage_layers": last,
            "embedding_as_layer": emb, "loss_as_layer": loss,
        }  # fmt: skip
        if v > 1 and (first is not None or last is not None):
            layout = end_chunk_layout(m.layers, pp, v, first, last)
            split = {"pipeline_layout": layout} if layout else split
        if e.get("pipeline_layout"):  # the source's own layout (Megatron-Core's notation)
            split = {"pipeline_layout": e["pipeline_layout"]}
        s = Strategy(
            tp, pp, dp, mb, e["global_batch"], rc, bool(sp) and tp > 1, z, v, e["precision"],
            cp=e.get("cp") or 1, stack=st, ep=e.get("ep") or 1, etp=e.get("etp") or 0,
            recompute_modules=tuple(e.get("recompute_modules") or ()) if rc == "selective" else (),
            **split,
        )  # fmt: skip
        try:
            check(m, s, e["gpus"])
        except PlanError as err:
            why = why or str(err)
            continue
        out.append(s)
    return out, why


def memory_check(e: dict[str, Any], m: Model) -> dict[str, Any] | None:
    """The planner's memory per GPU against the source's (``result.memory_GiB``: the peak that
    PyTorch's caching allocator reserved, so without the CUDA context and the workspaces outside
    it, RESERVED_BYTES), for a configuration the source states whole; None without a figure."""
    measured = e["result"].get("memory_GiB")
    if measured is None:
        return None
    strategies, why = choices(e, m)
    if len(strategies) != 1:
        return {"measured_GiB": measured, "why": why or f"{len(strategies)} configurations fit"}
    s = strategies[0]
    mem = memory(m, s, 0.0, in_flight_counts(s.pp, s.micro_batches, s.interleave))
    predicted = (mem.total - RESERVED_BYTES) / 2**30
    return {
        "measured_GiB": measured,
        "predicted_GiB": predicted,
        "error": predicted / measured - 1,
        "config": s.label(),
    }


def best_prediction(e: dict[str, Any], m: Model, c: Cluster) -> tuple[Prediction | None, int, str]:
    """The entry's prediction on ``c``: the fastest of the configurations its source leaves
    open that fits (the fastest of all where none fits), how many there were, and why there
    were none."""
    strategies, why = choices(e, m)
    preds = [predict_strategy(m, c, s) for s in strategies]
    if not preds:
        return None, 0, why
    fitting = [p for p in preds if p.memory.fits]
    return min(fitting or preds, key=lambda p: p.step_ns), len(preds), why


def predict_entry(e: dict[str, Any]) -> dict[str, Any]:
    m = model_of(e)
    row: dict[str, Any] = {
        "id": e["id"],
        "gpus": e["gpus"],
        "gpu": e["gpu"],
        "precision": e["precision"],
        "kind": "moe" if m.moe else "dense",
    }
    if (mem := memory_check(e, m)) is not None:
        row["memory"] = mem
    if e.get("not_counted"):  # the source leaves the run's settings in doubt: shown, not counted
        return row | {"counted": False, "why": f"not counted: {e['not_counted']}"}
    try:
        c, note = cluster_of(e)
    except PlanError as err:  # e.g. a GPU whose peaks are not published
        return row | {"counted": False, "why": str(err)}
    measured = measured_step_s(e, m)
    best, n, why = best_prediction(e, m, c)
    if best is None:
        return row | {
            "counted": False,
            "why": f"no configuration passes the planner's checks: {why}",
            "measured_step_s": measured,
        }
    step = best.step_ns * 1e-9
    return row | {
        "counted": True,
        "measured_step_s": measured,
        "predicted_step_s": step,
        "error": (step - measured) / measured,
        "config": best.strategy.label(),
        "chosen_among": n,
        "stack": best.strategy.software.name,
        "fits": best.memory.fits,
        "memory_GiB": best.memory.total / 2**30,
        "mfu_predicted": best.mfu,
        "note": note,
    }
