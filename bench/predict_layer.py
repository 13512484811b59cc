"""The planner's layer model against published per-layer times (bench/data/public_layer_times.json).

A table of one layer's measured forward and backward checks the parts a step's total hides:
whether the backward's share, recompute's cost and sequence parallelism's effect come out right,
not only their sum, and whether a GPU's kernels run at the planner's rates outside any training
framework's schedule. A table names a published run of ``public_llm_training.json`` (its model,
GPUs, system and training software: ``_public_entries.model_of``, ``cluster_of``, ``choices``)
or gives its own configuration (``config``: model, system, micro-batch, stack); each row
changes only what its experiment changes (recompute, sequence parallelism, precision, the
attention kernel, dropout). The planner's forward and backward are ``Prediction.layer()``'s,
one layer for one micro-batch on one GPU: its compute part by part, the compute lost to
collectives beside it and its exposed tensor-parallel communication (the backward with
recompute); nothing is fitted to these times.

Rows whose norms, activation, dropout and residual adds run as eager PyTorch operators
(``elementwise: eager``) move more bytes than the fused kernels the planner times; the result
reports them apart (``eager``) from those it claims to time (``fused``).

    python bench/predict_layer.py [--out bench/results/predict_layer.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import _public_entries as pp
from stallscope.plan import Prediction, Strategy, load_model, load_system, predict_strategy

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "public_layer_times.json"
DEFAULT_OUT = HERE / "results" / "predict_layer.json"
PARTS = ("forward", "backward", "combined")


def _configured(
    table: dict[str, Any], runs: dict[str, dict[str, Any]], row: dict[str, Any]
) -> Prediction:
    """The prediction of ``row``: the table's run or configuration with the row's settings."""
    if "run" in table:
        e = runs[table["run"]]
        m = pp.model_of(e)
        c, _ = pp.cluster_of(e)
        base = pp.choices(e, m)[0][0]
        s = base.with_(recompute=row["recompute"], sequence_parallel=row["sequence_parallel"])
        return predict_strategy(m, c, s)
    cfg = table["config"]
    m = load_model(cfg["model"] | {"dropout": row["dropout"]})
    mb = cfg["micro_batch"]
    stack = cfg["stack"] | {"attention": row["attention"]}
    s = Strategy(micro_batch=mb, global_batch=mb, precision=row["precision"], stack=stack)
    return predict_strategy(m, load_system(cfg["system"]), s)


def table_rows(table: dict[str, Any], runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The planner's forward, backward and their sum (ms) for each row of ``table``, beside
    the measured ones (a table may give only their sum)."""
    out = []
    for r in table["rows"]:
        p = _configured(table, runs, r)
        lay = p.layer()
        fwd, bwd = float(lay["forward_s"].sum()) * 1e3, float(lay["backward_s"].sum()) * 1e3
        comm = lay.filter(lay["part"] == "communication").row(0, named=True)
        predicted = {"forward": fwd, "backward": bwd, "combined": fwd + bwd}
        measured = {k: r[k] for k in ("forward", "backward") if k in r}
        measured["combined"] = r.get("combined", sum(measured.values()))
        out.append(
            {
                "table": table["id"],
                "experiment": r["experiment"],
                "config": p.strategy.label(),
                "elementwise": r["elementwise"],
                "measured_ms": measured,
                "predicted_ms": predicted,
                "tp_comm_exposed_ms": {
                    "forward": comm["forward_s"] * 1e3,
                    "backward": comm["backward_s"] * 1e3,
                },
                "error": {k: predicted[k] / v - 1 for k, v in measured.items()},
            }
        )
    return out


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and max absolute error of each part over the rows that measure it."""
    out: dict[str, Any] = {"rows": len(rows)}
    for part in PARTS:
        errs = [abs(r["error"][part]) for r in rows if part in r["error"]]
        if errs:
            out[part] = {"mean_abs_error": statistics.fmean(errs), "max_abs_error": max(errs)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args()
    t = time.perf_counter()
    runs = {e["id"]: e for e in json.loads(pp.DATA.read_text())["entries"]}
    rows = [r for tb in json.loads(DATA.read_text())["tables"] for r in table_rows(tb, runs)]
    doc = {
        "what": "planner per-layer forward / backward vs published per-layer times "
        "(bench/data/public_layer_times.json)",
        "rows": rows,
        "fused": figures([r for r in rows if r["elementwise"] == "fused"]),
        "eager": figures([r for r in rows if r["elementwise"] == "eager"]),
        "seconds": time.perf_counter() - t,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        mm, pm, er = r["measured_ms"], r["predicted_ms"], r["error"]
        split = "".join(f"{k} {pm[k]:5.2f} ({mm[k]}) " for k in ("forward", "backward") if k in mm)
        print(
            f"{r['table'][:14]:14} {r['experiment']:32} {split}combined {pm['combined']:6.2f} "
            f"ms ({mm['combined']:.2f}) {er['combined'] * 100:+5.1f} % [{r['elementwise']}]"
        )
    print(json.dumps({k: doc[k] for k in ("fused", "eager")}))


if __name__ == "__main__":
    main()
