"""The planner against published LLM training measurements (bench/data/public_llm_training.json).

Every entry is predicted from the model's shape, the parallel configuration, the system and the
training software the run used (its ``stack``: a preset of ``stallscope.plan.stacks()`` and
where the run departs from it, each with its source) alone (``stallscope.plan.predict_strategy``);
nothing is fitted to these measurements. Each published result is turned into a step time with
the source's own definition:

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
can express, are reported with the reason and not counted. The result gives the error per
source and per GPU.

Memory (``memory`` in the result): where a source publishes the memory per GPU (torchtitan's
benchmarks: the peak PyTorch's caching allocator reserved) and states the configuration whole,
the planner's memory per GPU less the CUDA context against it, for every such run whether or not
its step time is counted (the 96 GB H100's memory does not need its unpublished peaks).

Anchored (``anchored`` in the result): each dense run predicted with the compute factor
(``stallscope.plan.anchor``) that reproduces the other runs of its source on its GPU, as a user
who measured one configuration of their own software on their own GPUs would plan the others
(``anchored_check``).

The held-out check (``split`` in the result): the error of the runs published before
``SPLIT_DATE`` and of those published after. The planner's constants come from datasheets and
measurements of the hardware (kernel benchmarks, NCCL tests, this project's measured device
tables), none from a published step time, so both halves test it out of sample; a model fitted
to one half would do visibly worse on the other.

    python bench/predict_public.py [--out bench/results/predict_public.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from stallscope.plan import (
    PlanError,
    Prediction,
    Stack,
    Strategy,
    anchor,
    load_model,
    load_stack,
    load_system,
    predict_strategy,
)
from stallscope.plan._cluster import Cluster, anchored
from stallscope.plan._memory import RESERVED_BYTES, memory
from stallscope.plan._model import Model
from stallscope.plan._pipeline_layout import write_layout
from stallscope.plan._schedule import in_flight_counts
from stallscope.plan._strategy import check

DATA = Path(__file__).parent / "data" / "public_llm_training.json"
#: Runs on Megatron-LM or Megatron-DeepSpeed before flash attention, whose models keep the
#: frameworks' default dropout of 0.1 (--attention-dropout, --hidden-dropout).
FRAMEWORK_2021 = ("narayanan21", "korthikanti22", "megatronlm2101", "smith22", "bigscience22")
#: The split of the held-out check: the sources' publication dates (2021-2024-04: Megatron-LM
#: papers and README, MT-NLG, BLOOM, llm-foundry; 2024-07 on: Llama 3, NeMo 24.07,
#: dgxc-benchmarking 24.11, 25.04, 25.05; 2025-12 on: Megatron-Bridge 25.11, 26.04.01, 26.06).
SPLIT_DATE = "2024-06-01"
DEFAULT_OUT = Path(__file__).parent / "results" / "predict_public.json"
ACCURACY = Path(__file__).parents[1] / "python" / "stallscope" / "plan" / "data" / "accuracy.json"


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


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Count, mean and max absolute error and mean signed error of counted rows."""
    errs = [r["error"] for r in rows]
    return {
        "sources": sorted({r["id"].split("-")[0] for r in rows}),
        "n": len(errs),
        "mean_abs_error": statistics.fmean(abs(x) for x in errs) if errs else None,
        "max_abs_error": max((abs(x) for x in errs), default=None),
        "mean_error": statistics.fmean(errs) if errs else None,
    }


def _figures(errs: list[float]) -> dict[str, Any]:
    return {
        "runs": len(errs),
        "mean_error": statistics.fmean(errs),
        "mean_abs_error": statistics.fmean(abs(e) for e in errs),
        "max_abs_error": max(abs(e) for e in errs),
        "too_fast": sum(e < 0 for e in errs),
    }


def _kind_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    gpus = sorted({r["gpu"] for r in rows})
    return {
        **_figures([r["error"] for r in rows]),
        "per_gpu": {g: _figures([r["error"] for r in rows if r["gpu"] == g]) for g in gpus},
    }


def memory_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The memory check over every run whose source publishes its memory per GPU."""
    checked = [r for r in rows if "error" in r.get("memory", {})]
    errs = [r["memory"]["error"] for r in checked]
    return {
        "about": "memory per GPU, predicted (less the CUDA context) over the source's peak "
        "reserved by PyTorch's caching allocator, minus 1; every run with a published figure "
        "and a configuration stated whole, whether or not its step time is counted",
        "n": len(errs),
        "mean_abs_error": statistics.fmean(abs(x) for x in errs) if errs else None,
        "max_abs_error": max((abs(x) for x in errs), default=None),
        "mean_error": statistics.fmean(errs) if errs else None,
        "left_out": {r["id"]: r["memory"]["why"] for r in rows if "why" in r.get("memory", {})},
    }


def group_of(row: dict[str, Any], model: str | None = None) -> str:
    """A row's anchoring group: its source (one release of one framework) and GPU, and with
    ``model`` the model too."""
    return f"{row['id'].split('-')[0]} {row['gpu']}" + (f" {model}" if model else "")


def _leave_one_out(
    counted: list[dict[str, Any]],
    factors: dict[str, float],
    key: Any,
    by_id: dict[str, dict[str, Any]],
) -> dict[str, dict[str, float]]:
    """Per group of ``key``, per row: the error of the row predicted at the geometric mean of
    the other rows' compute factors."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in counted:
        groups.setdefault(key(r), []).append(r)
    out: dict[str, dict[str, float]] = {}
    for g, members in groups.items():
        for r in members:
            others = [factors[o["id"]] for o in members if o is not r]
            if not others:
                continue
            f = math.exp(statistics.fmean(math.log(x) for x in others))
            e = by_id[r["id"]]
            c = cluster_of(e)[0]
            best, _, _ = best_prediction(e, model_of(e), replace(c, device=anchored(c.device, f)))
            assert best is not None  # a counted row has one
            out.setdefault(g, {})[r["id"]] = best.step_ns * 1e-9 / r["measured_step_s"] - 1
    return out


def _loo_figures(errs: dict[str, dict[str, float]]) -> dict[str, Any]:
    flat = [x for v in errs.values() for x in v.values()]
    return {
        "runs": len(flat),
        "groups": len(errs),
        "mean_abs_error": statistics.fmean(abs(x) for x in flat),
        "median_abs_error": statistics.median(abs(x) for x in flat),
        "max_abs_error": max(abs(x) for x in flat),
        "mean_error": statistics.fmean(flat),
    }


def anchored_check(entries: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The planner anchored on one measured step (``stallscope.plan.anchor``): what a user who
    measured one configuration of their own job would see for the others. A group is the dense
    runs of one source (one release of one framework) on one GPU (``same_model``: of one model
    too). Each run's compute factor is the one at which its own configuration takes its
    measured step; each run is then predicted at the geometric mean of the other runs' factors
    of its group (leave-one-out: never its own), the configurations its source leaves open
    chosen again. Each counted row in a group of two or more gains its ``compute_factor`` and
    ``anchored_error`` (``anchored_error_same_model``)."""
    by_id = {e["id"]: e for e in entries}
    counted = [r for r in rows if r["counted"] and r["kind"] == "dense"]
    sizes: dict[str, int] = {}
    for r in counted:
        sizes[group_of(r)] = sizes.get(group_of(r), 0) + 1
    counted = [r for r in counted if sizes[group_of(r)] > 1]
    factors: dict[str, float] = {}
    for r in counted:
        e = by_id[r["id"]]
        best, _, _ = best_prediction(e, model_of(e), cluster_of(e)[0])
        assert best is not None  # a counted row has one
        factors[r["id"]] = r["compute_factor"] = anchor(best, r["measured_step_s"]).factor
    coarse = _leave_one_out(counted, factors, group_of, by_id)
    fine = _leave_one_out(counted, factors, lambda r: group_of(r, by_id[r["id"]]["model"]), by_id)
    row_of = {r["id"]: r for r in counted}
    for name, errs in (("anchored_error", coarse), ("anchored_error_same_model", fine)):
        for v in errs.values():
            for i, x in v.items():
                row_of[i][name] = x
    members: dict[str, list[str]] = {}
    for r in counted:
        members.setdefault(group_of(r), []).append(r["id"])
    return {
        "about": "each dense run predicted at the geometric mean of the compute factors that "
        "reproduce the other runs of its source on its GPU (leave-one-out; anchored_check): "
        "the planner anchored on measured steps of the same software and GPU; same_model: "
        "the other runs of the same model too",
        **_loo_figures(coarse),
        "same_model": _loo_figures(fine),
        "per_group": {
            g: {
                "runs": len(v),
                "mean_abs_error": statistics.fmean(abs(x) for x in v.values()),
                "max_abs_error": max(abs(x) for x in v.values()),
                "compute_factor": math.exp(
                    statistics.fmean(math.log(factors[i]) for i in members[g])
                ),
            }
            for g, v in sorted(coarse.items())
        },
    }


def pair_check(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of one source and shape that differ in a named setting (an entry's ``pair``):
    their measured and predicted step ratios, counted runs or not. An error common to both
    cancels, so the ratio checks the mechanism the setting switches."""
    by_id = {e["id"]: e for e in entries}
    out = []
    for e in entries:
        if "pair" not in e:
            continue
        other = by_id[e["pair"]["with"]]
        steps = []
        for x in (e, other):
            m = model_of(x)
            best, _, why = best_prediction(x, m, cluster_of(x)[0])
            if best is None:
                raise SystemExit(f"{x['id']}: no configuration passes the planner's checks: {why}")
            steps.append((measured_step_s(x, m), best.step_ns * 1e-9, best.strategy.label()))
        (ma, pa, _), (mb, pb, _) = steps
        out.append(
            {
                "runs": [e["id"], other["id"]],
                "differs_in": e["pair"]["differs_in"],
                "measured_s": [ma, mb],
                "predicted_s": [pa, pb],
                "measured_ratio": mb / ma,
                "predicted_ratio": pb / pa,
                "error": (pb / pa) / (mb / ma) - 1,
            }
        )
    return out


def accuracy_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """What the planner shows of a run of this benchmark (stallscope/plan/_accuracy.py): the
    dense models' figures, and the mixture-of-experts models' under ``moe``."""
    rows = [r for r in doc["rows"] if r["counted"]]
    return {
        "about": "The planner's step time against published measurements, written by "
        "bench/predict_public.py (its result: bench/results/predict_public.json); "
        "error = predicted / measured - 1; dense models' runs, per_gpu: the same over each "
        "GPU's runs; moe: the same for mixture-of-experts models; anchored: dense runs "
        "predicted with the compute factor of the other runs of their source and GPU.",
        **_kind_figures([r for r in rows if r["kind"] == "dense"]),
        "date": doc["date"][:10],
        "moe": _kind_figures([r for r in rows if r["kind"] == "moe"]),
        "anchored": {
            k: doc["anchored"][k]
            for k in ("runs", "groups", "mean_abs_error", "median_abs_error", "max_abs_error")
        }
        | {
            "same_model": {
                k: doc["anchored"]["same_model"][k]
                for k in ("runs", "groups", "mean_abs_error", "median_abs_error", "max_abs_error")
            }
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args()
    entries = json.loads(DATA.read_text())["entries"]
    t = time.perf_counter()
    rows = [predict_entry(e) for e in entries]
    anchored = anchored_check(entries, rows)
    moe = [r for r in rows if r["counted"] and r["kind"] == "moe"]
    counted = [r for r in rows if r["counted"] and r["kind"] == "dense"]
    errs = [abs(r["error"]) for r in counted]
    by_source: dict[str, list[float]] = {}
    by_gpu: dict[str, list[float]] = {}
    for r in counted:
        by_source.setdefault(r["id"].split("-")[0], []).append(r["error"])
        by_gpu.setdefault(r["gpu"], []).append(r["error"])
    dates = {e["id"]: e["source"]["date"] for e in entries}
    halves = {
        "first": [r for r in counted if dates[r["id"]] < SPLIT_DATE],
        "second": [r for r in counted if dates[r["id"]] >= SPLIT_DATE],
    }
    doc = {
        "what": "planner step time vs published measurements (bench/data/public_llm_training.json)",
        "target": "mean absolute error <= 5 %, max <= 12 %",
        "scope": "the figures below the target are the dense models' runs; moe: the "
        "mixture-of-experts runs, reported on their own",
        "entries": len(rows),
        "counted": len(counted),
        "mean_abs_error": statistics.fmean(errs),
        "max_abs_error": max(errs),
        "median_abs_error": statistics.median(errs),
        "met": statistics.fmean(errs) <= 0.05 and max(errs) <= 0.12,
        "per_source": {
            k: {
                "n": len(v),
                "mean_error": statistics.fmean(v),
                "mean_abs_error": statistics.fmean(abs(x) for x in v),
            }
            for k, v in by_source.items()
        },
        "per_gpu": {
            k: {
                "n": len(v),
                "mean_error": statistics.fmean(v),
                "mean_abs_error": statistics.fmean(abs(x) for x in v),
                "max_abs_error": max(abs(x) for x in v),
            }
            for k, v in by_gpu.items()
        },
        "moe": {
            **summary(moe),
            "median_abs_error": statistics.median(abs(r["error"]) for r in moe) if moe else None,
            "per_gpu": {
                g: summary([r for r in moe if r["gpu"] == g])
                for g in sorted({r["gpu"] for r in moe})
            },
        },
        "anchored": anchored,
        "pairs": {
            "about": "runs of one source and shape a named setting apart (an entry's pair: "
            "runs = the entry, its twin): ratio = the twin's step / the entry's; error = "
            "predicted ratio / measured ratio - 1",
            "runs": pair_check(entries),
        },
        "memory": memory_summary(rows),
        "split": {
            "about": f"runs published before {SPLIT_DATE} (first) and from then on (second); "
            "no constant of the planner comes from either half's step times (see the module doc)",
            **{k: summary(v) for k, v in halves.items()},
        },
        "seconds": time.perf_counter() - t,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rows": rows,
    }
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    if a.out == DEFAULT_OUT:  # the summary the planner prints beside its predictions
        ACCURACY.write_text(json.dumps(accuracy_summary(doc), indent=1) + "\n")
    for r in rows:
        if r["counted"]:
            print(
                f"{r['id']:45s} measured {r['measured_step_s']:8.3f} s  predicted {r['predicted_step_s']:8.3f} s  {100 * r['error']:+6.1f} %  {r['config']}{'' if r['fits'] else ' (does not fit)'}"
            )
        else:
            print(f"{r['id']:45s} not counted: {r['why']}")
    for pr in doc["pairs"]["runs"]:
        print(
            f"{pr['runs'][1]} / {pr['runs'][0]}: measured x{pr['measured_ratio']:.2f}, "
            f"predicted x{pr['predicted_ratio']:.2f} ({100 * pr['error']:+.1f} %)"
        )
    for r in rows:
        if "error" in r.get("memory", {}):
            mem = r["memory"]
            print(
                f"{r['id']:45s} memory {mem['measured_GiB']:6.1f} GiB  predicted {mem['predicted_GiB']:6.1f} GiB  {100 * mem['error']:+6.1f} %"
            )
    print(json.dumps({k: v for k, v in doc.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
