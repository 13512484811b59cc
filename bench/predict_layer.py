"""The planner's layer model against published per-layer times (bench/data/public_layer_times.json).

A table of per-layer forward and backward times measured in a training step checks the parts
a step's total hides: whether the backward's share, recompute's cost and sequence parallelism's
effect come out right, not only their sum. Each table names a published run of
``public_llm_training.json``; its model, GPUs, system and training software are that run's
(``predict_public.model_of``, ``cluster_of``, ``choices``), and each row changes only what the
table's experiment changes (recompute, sequence parallelism). The planner's forward and
backward are ``Prediction.layer()``'s, one layer for one micro-batch on one GPU: its compute
part by part, the compute lost to collectives beside it and its exposed tensor-parallel
communication (the backward with recompute); nothing is fitted to these times.

    python bench/predict_layer.py [--out bench/results/predict_layer.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import predict_public as pp
from stallscope.plan import predict_strategy

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "public_layer_times.json"
DEFAULT_OUT = HERE / "results" / "predict_layer.json"


def table_rows(table: dict[str, Any], runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The planner's forward and backward (ms) for each row of ``table``, beside the measured."""
    e = runs[table["run"]]
    m = pp.model_of(e)
    c, _ = pp.cluster_of(e)
    base = pp.choices(e, m)[0][0]
    out = []
    for r in table["rows"]:
        s = base.with_(recompute=r["recompute"], sequence_parallel=r["sequence_parallel"])
        lay = predict_strategy(m, c, s).layer()
        fwd, bwd = lay["forward_s"].sum() * 1e3, lay["backward_s"].sum() * 1e3
        comm = lay.filter(lay["part"] == "communication").row(0, named=True)
        meas = r["forward"] + r["backward"]
        out.append(
            {
                "table": table["id"],
                "experiment": r["experiment"],
                "config": s.label(),
                "measured_ms": {"forward": r["forward"], "backward": r["backward"]},
                "predicted_ms": {"forward": fwd, "backward": bwd},
                "tp_comm_exposed_ms": {
                    "forward": comm["forward_s"] * 1e3,
                    "backward": comm["backward_s"] * 1e3,
                },
                "error": {
                    "forward": fwd / r["forward"] - 1,
                    "backward": bwd / r["backward"] - 1,
                    "combined": (fwd + bwd) / meas - 1,
                },
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args()
    t = time.perf_counter()
    runs = {e["id"]: e for e in json.loads(pp.DATA.read_text())["entries"]}
    rows = [r for tb in json.loads(DATA.read_text())["tables"] for r in table_rows(tb, runs)]

    def figures(part: str) -> dict[str, float]:
        errs = [abs(r["error"][part]) for r in rows]
        return {"mean_abs_error": statistics.fmean(errs), "max_abs_error": max(errs)}

    doc = {
        "what": "planner per-layer forward / backward vs published per-layer times "
        "(bench/data/public_layer_times.json)",
        "rows": rows,
        **{part: figures(part) for part in ("forward", "backward", "combined")},
        "seconds": time.perf_counter() - t,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        mm, pm, er = r["measured_ms"], r["predicted_ms"], r["error"]
        print(
            f"{r['experiment']:24} forward {pm['forward']:5.2f} ms ({mm['forward']}) "
            f"backward {pm['backward']:5.2f} ms ({mm['backward']}) "
            f"combined {er['combined'] * 100:+5.1f} %"
        )
    print(json.dumps({k: doc[k] for k in ("forward", "backward", "combined")}))


if __name__ == "__main__":
    main()
