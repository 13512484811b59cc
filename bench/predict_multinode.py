"""Multi-node all-reduce predicted from the link table, against public measurements.

The figures (bench/data/nccl_multinode_allreduce.json, each with its source and role): nccl-tests'
all-reduce on 2 to 32 nodes of p5 (H100, 3,200 Gbps EFA) by size, 5 nodes of H100 over RoCE, 2
nodes of A100 over InfiniBand, NVIDIA maintainers' reference figures for DGX A100 (HDR) and DGX
H100 (NDR), and 1-4 p4d nodes from a report of a cluster scaling worse than its links.

Per source the predictor is given the system the source names, nothing measured on it: the
device's link within a node from the link table (p4d: its own 1-node row, as a calibration would
give it), and across nodes the link table's network or the node's network in Gbit/s
(Target.inter_node_gbps), through stallscope.predict's NCCL model. Rows that forced
NCCL_ALGO=RING are compared with the model's ring; the others with the fastest algorithm the
model offers, as NCCL's tuner picks. It reports the predicted bus bandwidth, the algorithm that
won and the error of each row, and the mean absolute error per source and role.

No target: the model is not fitted to these figures; the reference rows are the basis of the
link table's NCCL network efficiency and agree by construction. What the model takes from NCCL
itself (src/graph/tuning.cc) rather than from these figures: the ring's steps that cross nodes
pay the network latency and the others the NVLink one, and the tree's bandwidth at mid sizes
is NCCL's tree correction factor of it; no hierarchical all-reduce (NCCL has none without
CollNet / NVLS). Per source and node count the mean absolute error is reported apart for
messages from 2 GiB up (bandwidth-bound) and below.

    python bench/predict_multinode.py    # results: bench/results/predict_multinode.json
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from stallscope.comm import bus_factor
from stallscope.predict import device, link
from stallscope.predict._comm import CommModel, Tier
from stallscope.predict._tiers import given_inter, table_inter, table_intra

HERE = Path(__file__).resolve().parent
NAMES = ("ring", "tree")  # the order of CommModel._options, NCCL all-reduce


def model_of(src: dict[str, Any]) -> CommModel:
    """The comm model the predictor builds for the source's system."""
    sysd = src["system"]
    if sysd["intra_node"].startswith("the 1-node row"):
        one = next(r for r in src["rows"] if r["nodes"] == 1)
        nvs = link(device(sysd["device"]).intra_node_link or "nvswitch-gen2")
        intra: Tier | None = Tier(
            nvs.latency_us * 1e-6, 1.0 / (one["busbw_GBps"] * 1e9), "1-node measurement"
        )
    else:
        intra = table_intra(sysd["device"])
    if "network" in sysd:
        inter, nic = table_inter(sysd["network"])
    else:
        inter, node = given_inter(float(sysd["inter_node_gbps"]), None)
        nic = node
    return CommModel("nccl", intra, inter, nic)


def predict_row(model: CommModel, row: dict[str, Any], per: int, forced: str) -> dict[str, Any]:
    nodes, n = row["nodes"], float(row["bytes"])
    p = nodes * per
    options = model._options("all_reduce", n, nodes, per)
    pick = 0 if forced == "ring" else options.index(min(options))
    t, won = options[pick], NAMES[pick]
    busbw = bus_factor("all_reduce", p) * n / t / 1e9
    meas = row["busbw_GBps"]
    return {
        "nodes": nodes,
        "bytes": int(n),
        "measured_busbw_GBps": meas,
        "predicted_busbw_GBps": busbw,
        "algorithm": won,
        "error_pct": 100.0 * (busbw - meas) / meas,
    }


def main() -> int:
    data = orjson.loads((HERE / "data" / "nccl_multinode_allreduce.json").read_bytes())
    out: list[dict[str, Any]] = []
    for src in data["sources"]:
        model = model_of(src)
        per = src["system"]["gpus_per_node"]
        rows = [predict_row(model, r, per, src["algorithm"]) for r in src["rows"]]
        multi = [abs(r["error_pct"]) for r in rows if r["nodes"] > 1]
        by_nodes = {}
        for nodes in sorted({r["nodes"] for r in rows}):
            band = {}
            for name, keep in (
                ("below_2GiB", lambda b: b < 2**31),
                ("from_2GiB", lambda b: b >= 2**31),
            ):
                e = [abs(r["error_pct"]) for r in rows if r["nodes"] == nodes and keep(r["bytes"])]
                if e:
                    band[name] = statistics.fmean(e)
            by_nodes[str(nodes)] = band
        out.append(
            {
                "id": src["id"],
                "role": src["role"],
                "algorithm": src["algorithm"],
                "source": src["source"],
                "links": model.describe(),
                "rows": rows,
                "mean_abs_error_pct_multi_node": statistics.fmean(multi) if multi else None,
                "mean_abs_error_pct_by_nodes": by_nodes,
            }
        )
    checks = [abs(r["error_pct"]) for s in out if s["role"] == "check" for r in s["rows"]]
    res = {
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "sources": out,
        "mean_abs_error_pct_checks": statistics.fmean(checks),
    }
    path = HERE / "results" / "predict_multinode.json"
    path.write_bytes(orjson.dumps(res, option=orjson.OPT_INDENT_2) + b"\n")
    for s in out:
        print(f"{s['id']} ({s['role']}, {s['algorithm']}):")
        for r in s["rows"]:
            print(
                f"  {r['nodes']:3d} node(s) {r['bytes'] / 2**20:7.0f} MiB: measured "
                f"{r['measured_busbw_GBps']:6.1f}, predicted {r['predicted_busbw_GBps']:6.1f} "
                f"GB/s ({r['algorithm']}), {r['error_pct']:+.1f} %"
            )
        bands = ", ".join(
            f"{n} nodes " + " / ".join(f"{k} {v:.1f} %" for k, v in b.items())
            for n, b in s["mean_abs_error_pct_by_nodes"].items()
        )
        print(f"  mean absolute error: {bands}")
    print(f"checks: mean absolute error {res['mean_abs_error_pct_checks']:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
