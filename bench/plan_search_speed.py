"""Strategy search speed (target: 10,000 configurations in <= 10 s on 2 cores).

GPT-3 175B (96 layers, h 12288, 96 heads, s 2048, V 51200; unfused attention with dropout, as
Megatron ran it in 2021) on 768 A100-80GB GPUs (96 DGX A100 nodes), global batch 1536: every
(tp <= 8, pp, dp, micro-batch 1-16, recompute none / selective / full, sequence parallel,
ZeRO 0-3, interleave 1-8, pipeline split even or with the embedding and loss as layers) that
divides the GPUs. Each run is a fresh process (no schedule graph
cached from an earlier run); it reports the configurations enumerated, those that fit and were
simulated, and the wall (and CPU) time of the whole search including the top-10's detailed
simulation; the target is met when 10,000 of them take <= 10 s (the median wall time scaled to
10,000). The median of --runs, bracketed by the noisy-neighbour guard.

    python bench/plan_search_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _guard import check

MODEL = {
    "name": "gpt3-175b",
    "layers": 96,
    "hidden": 12288,
    "heads": 96,
    "seq_len": 2048,
    "vocab": 51200,
    "flash_attention": False,
    "dropout": True,
}
# DGX A100: 8 GPUs, NVSwitch 300 GB/s per GPU per direction, 8 x 200 Gb/s HDR per node; the
# GPU's figures (312 TFLOP/s bf16 dense, 2,039 GB/s, 80 GB, 108 SMs) from NVIDIA's A100
# datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (2026-11-27)
SYSTEM = {
    "name": "dgx-a100",
    "gpu": "A100-80GB",
    "gpus_per_node": 8,
    "intra_node_GBps": 300,
    "inter_node_Gbps": 1600,
    "peak_tflops": {"bf16": 312, "fp16": 312},
    "hbm_GBps": 2039,
    "hbm_GB": 80,
    "sms": 108,
}
GPUS, BATCH = 768, 1536


def once() -> dict[str, float]:
    from stallscope.plan import load_model, load_system
    from stallscope.plan._search import Space, search

    m, s = load_model(MODEL), load_system(SYSTEM)
    space = Space(micro_batches=(1, 2, 4, 8, 16), interleave=(1, 2, 3, 4, 6, 8))
    t, c = time.perf_counter(), time.process_time()
    r = search(m, s, GPUS, BATCH, top=10, space=space)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    best = r.table.row(0, named=True)
    return {
        "seconds": wall,
        "cpu_seconds": cpu,
        "enumerated": r.enumerated,
        "fitting": r.fitting,
        "best_step_s": best["step_s"],
        "best": f"tp{best['tp']} pp{best['pp']} dp{best['dp']} mb{best['micro_batch']} "
        f"v{best['interleave']} {best['recompute']} sp={best['sequence_parallel']} "
        f"z{best['zero']}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "plan_search_speed.json"
    )
    a = ap.parse_args()
    if a.one:
        print(json.dumps(once()))
        return
    guards = [check("before")]
    runs = []
    for _ in range(a.runs):
        out = subprocess.run(
            [sys.executable, __file__, "--one"], check=True, capture_output=True, text=True
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        print(runs[-1], file=sys.stderr)
    guards.append(check("after"))
    secs = [r["seconds"] for r in runs]
    med = statistics.median(secs)
    n = runs[0]["enumerated"]
    doc = {
        "what": "strategy search: GPT-3 175B on 768 A100 (96 DGX A100 nodes), global batch 1536",
        "machine": f"{platform.machine()}, {platform.python_version()}, 2 shared cores",
        "target": "10,000 configurations in <= 10 s",
        "enumerated": n,
        "fitting_simulated": runs[0]["fitting"],
        "median_s": round(med, 3),
        "runs_s": [round(x, 3) for x in secs],
        "per_10k_configurations_s": round(med * 10_000 / n, 3),
        "cpu_median_s": round(statistics.median(r["cpu_seconds"] for r in runs), 3),
        "met": n >= 10_000 and med * 10_000 / n <= 10.0,
        "best": runs[0]["best"],
        "best_step_s": runs[0]["best_step_s"],
        "guards": guards,
        "valid": all(g["quiet"] for g in guards),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
