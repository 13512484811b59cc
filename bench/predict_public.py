"""The planner against published LLM training measurements (bench/data/public_llm_training.json).

Every entry is predicted from the model's shape, the parallel configuration, the system and the
training software the run used (its ``stack``: a preset of ``stallscope.plan.stacks()`` and
where the run departs from it, each with its source) alone (``stallscope.plan.predict_strategy``);
nothing is fitted to these measurements. How an entry becomes the planner's inputs and its
result a step time: ``_public_entries``. The result gives the error per source and per GPU.

Memory (``memory`` in the result): where a source publishes the memory per GPU (torchtitan's
benchmarks: the peak PyTorch's caching allocator reserved) and states the configuration whole,
the planner's memory per GPU less the CUDA context against it, for every such run whether or not
its step time is counted (the 96 GB H100's memory does not need its unpublished peaks).

Anchored (``anchored`` in the result): each dense run predicted with the compute factor
(``stallscope.plan.anchor``) that reproduces the other runs of its source on its GPU, as a user
who measured one configuration of their own software on their own GPUs would plan the others
(``anchored_check``).

Pairs (``pairs`` in the result): runs of one source and model that differ in a named setting
(an entry's ``pairs``: the recompute, the GPU count, the precision, the MoE token dispatcher
or overlap),
compared by the ratio of their steps, in which an error common to both (the software release
above all) cancels (``pair_check``).

The held-out check (``split`` in the result): the error of the runs published before
``SPLIT_DATE`` and of those published after. The planner's constants come from datasheets and
measurements of the hardware (kernel benchmarks, NCCL tests, this project's measured device
tables), none from a published step time, so both halves test it out of sample; a model fitted
to one half would do visibly worse on the other.

    python bench/predict_public.py [--out bench/results/predict_public.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from _public_entries import (  # the bench folder's modules
    DATA,
    best_prediction,
    cluster_of,
    measured_step_s,
    model_of,
    predict_entry,
)
from stallscope.plan import PlanError, anchor
from stallscope.plan._cluster import anchored

#: The split of the held-out check: the sources' publication dates (2021-2024-04: Megatron-LM
#: papers and README, MT-NLG, BLOOM, llm-foundry; 2024-07 on: Llama 3, NeMo 24.07,
#: dgxc-benchmarking 24.11, 25.04, 25.05; 2025-12 on: Megatron-Bridge 25.11, 26.04.01, 26.06).
SPLIT_DATE = "2024-06-01"
DEFAULT_OUT = Path(__file__).parent / "results" / "predict_public.json"
ACCURACY = Path(__file__).parents[1] / "python" / "stallscope" / "plan" / "data" / "accuracy.json"


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
    """``error_figures`` as the planner's accuracy line reads them, with the runs too fast."""
    f = error_figures(errs)
    return {"runs": f.pop("n"), **f, "too_fast": sum(e < 0 for e in errs)}


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
    """Runs of one source and model that differ in a named setting (an entry's ``pairs``):
    their measured and predicted step ratios, counted runs or not (a run the planner cannot
    predict leaves its pair with the reason). An error common to both cancels, so the ratio
    checks the mechanism the setting switches."""
    by_id = {e["id"]: e for e in entries}
    steps: dict[str, tuple[float, float] | str] = {}

    def step(x: dict[str, Any]) -> tuple[float, float] | str:
        if x["id"] not in steps:  # (measured, predicted) seconds, or why there is none
            m = model_of(x)
            try:
                best, _, why = best_prediction(x, m, cluster_of(x)[0])
            except PlanError as err:
                best, why = None, str(err)
            steps[x["id"]] = (
                (measured_step_s(x, m), best.step_ns * 1e-9) if best else f"{x['id']}: {why}"
            )
        return steps[x["id"]]

    out = []
    for e in entries:
        for pair in e.get("pairs", ()):
            row: dict[str, Any] = {
                "runs": [e["id"], pair["with"]],
                "differs_in": pair["differs_in"],
            }
            a, b = step(e), step(by_id[pair["with"]])
            if isinstance(a, str) or isinstance(b, str):
                out.append(row | {"why": a if isinstance(a, str) else b})
                continue
            (ma, pa), (mb, pb) = a, b
            out.append(
                row
                | {
                    "measured_s": [ma, mb],
                    "predicted_s": [pa, pb],
                    "measured_ratio": mb / ma,
                    "predicted_ratio": pb / pa,
                    "error": (pb / pa) / (mb / ma) - 1,
                }
            )
    return out


def pair_kinds(pairs: list[dict[str, Any]], gpu: dict[str, str]) -> dict[str, Any]:
    """The pairs' ratio errors by the setting they differ in (``differs_in`` up to its first
    colon) and the GPU (``gpu``: each run's)."""
    kinds: dict[str, list[float]] = {}
    for pr in pairs:
        if "error" in pr:
            setting = pr["differs_in"].split(":")[0].split(" (")[0]
            kinds.setdefault(f"{setting}, {gpu[pr['runs'][0]]}", []).append(pr["error"])
    return {k: error_figures(v) for k, v in kinds.items()}


def error_figures(errs: list[float]) -> dict[str, Any]:
    """Count, mean signed, mean and max absolute error of one group's errors."""
    return {
        "n": len(errs),
        "mean_error": statistics.fmean(errs),
        "mean_abs_error": statistics.fmean(abs(x) for x in errs),
        "max_abs_error": max(abs(x) for x in errs),
    }


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
        "per_gpu": {k: error_figures(v) for k, v in by_gpu.items()},
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
            "about": "runs of one source and model a named setting apart (an entry's pairs: "
            "runs = the entry, its twin): ratio = the twin's step / the entry's; error = "
            "predicted ratio / measured ratio - 1",
            "runs": (pairs := pair_check(entries)),
            "by_setting": pair_kinds(pairs, {e["id"]: e["gpu"] for e in entries}),
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
        if "error" not in pr:
            print(f"{pr['runs'][1]} / {pr['runs'][0]}: not compared: {pr['why']}")
            continue
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
