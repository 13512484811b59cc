"""Multi-node all-reduce predicted from one node, against public p4d measurements.

The figures (bench/data/nccl_p4d_allreduce.json, with their source): nccl-tests' 1 GiB
all-reduce on 1, 2, 3 and 4 p4d-class instances (8 A100, NVSwitch, 4 x 100 Gbps EFA). The
prediction uses the 1-node result as the calibration of the tier within a node (its bus
bandwidth; the link table's NVSwitch latency) and the link table's aws-efa-p4d network across
nodes (50 GB/s per node, one of 4 NICs per rank's path), through stallscope.predict's NCCL
model (the fastest of flat ring, tree and hierarchical all-reduce). It reports the predicted
bus bandwidth, the algorithm that won, and the error against each measured row.

No target: the measured rows come from a report of slower scaling than expected on that
cluster (the thread's subject), so the error says how far that cluster fell short of what the
link figures promise as much as how good the model is.

    python bench/predict_p4d.py    # results: bench/results/predict_p4d.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

from stallscope.comm import bus_factor
from stallscope.predict import link
from stallscope.predict._comm import CommModel, Tier
from stallscope.predict._tiers import table_inter

HERE = Path(__file__).resolve().parent


def main() -> int:
    data = orjson.loads((HERE / "data" / "nccl_p4d_allreduce.json").read_bytes())
    per, n = data["ranks_per_node"], float(data["bytes"])
    one = next(r for r in data["rows"] if r["nodes"] == 1)
    nvswitch = link("nvswitch-gen2")
    intra = Tier(
        alpha_s=nvswitch.latency_us * 1e-6,
        beta_s_per_byte=1.0 / (one["busbw_GBps"] * 1e9),
        source=f"1-node measurement ({data['source']['url']})",
    )
    inter, nic = table_inter("aws-efa-p4d")
    model = CommModel("nccl", intra, inter, nic)
    names = ["flat ring", "hierarchical", "tree"]
    rows = []
    for r in data["rows"]:
        nodes = r["nodes"]
        p = nodes * per
        t = model.seconds("all_reduce", n, nodes, per)
        options = model._options("all_reduce", n, nodes, per)
        won = (names if nodes > 1 else ["ring", "tree"])[options.index(min(options))]
        busbw = bus_factor("all_reduce", p) * n / t / 1e9
        rows.append(
            {
                "nodes": nodes,
                "measured_busbw_GBps": r["busbw_GBps"],
                "predicted_busbw_GBps": busbw,
                "predicted_time_us": t * 1e6,
                "measured_time_us": r["time_us"],
                "algorithm": won,
                "error_pct": 100.0 * (busbw - r["busbw_GBps"]) / r["busbw_GBps"],
            }
        )
    res = {
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "source": data["source"],
        "links": model.describe(),
        "rows": rows,
        "mean_abs_error_pct_multi_node": sum(abs(r["error_pct"]) for r in rows if r["nodes"] > 1)
        / sum(1 for r in rows if r["nodes"] > 1),
    }
    out = HERE / "results" / "predict_p4d.json"
    out.write_bytes(orjson.dumps(res, option=orjson.OPT_INDENT_2) + b"\n")
    for r in rows:
        print(
            f"{r['nodes']} node(s): measured {r['measured_busbw_GBps']:6.1f} GB/s, predicted "
            f"{r['predicted_busbw_GBps']:6.1f} GB/s ({r['algorithm']}), {r['error_pct']:+.1f} %"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
