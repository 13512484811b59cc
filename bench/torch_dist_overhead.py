"""Cost of stallscope's torch.distributed instrumentation per collective call, on the CPU.

    python bench/torch_dist_overhead.py [--calls 3000] [--repeats 5]

A 1-rank gloo group; all_reduce of a 256-float tensor (sync) and with async_op=True + wait,
timed per call in three settings measured side by side in one run, interleaved per repeat:
plain torch, instrumented while no trace records, instrumented while tracing. Reports median
us per call over repeats and the added cost. Results: bench/results/torch_dist_overhead.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "torch_dist_overhead.json"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    import torch
    import torch.distributed as dist

    import stallscope
    from stallscope.torch import _collectives

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29400 + os.getpid() % 500))
    dist.init_process_group("gloo", rank=0, world_size=1)
    t = torch.ones(256)

    def run(async_op: bool) -> float:
        t0 = time.perf_counter()
        for _ in range(a.calls):
            if async_op:
                dist.all_reduce(t, async_op=True).wait()
            else:
                dist.all_reduce(t)
        return (time.perf_counter() - t0) / a.calls * 1e6

    res: dict[str, dict[str, list[float]]] = {}
    out = Path(tempfile.mkdtemp(prefix="stallscope-bench-"))
    for rep in range(a.repeats):
        for mode in ("plain", "instrumented", "tracing"):
            if mode == "plain":
                _collectives.unpatch()
            else:
                _collectives.patch()
            for async_op in (False, True):
                key = f"{'async' if async_op else 'sync'}"
                if mode == "tracing":
                    with stallscope.trace(out / f"r{rep}{key}", backends=()):
                        us = run(async_op)
                else:
                    us = run(async_op)
                res.setdefault(mode, {}).setdefault(key, []).append(us)
    dist.destroy_process_group()
    med = {m: {k: statistics.median(v) for k, v in d.items()} for m, d in res.items()}
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared)",
        "torch": torch.__version__,
        "load_avg_1min_at_end": os.getloadavg()[0],
        "calls": a.calls,
        "repeats": a.repeats,
        "median_us_per_call": med,
        "added_us_tracing_vs_plain": {k: med["tracing"][k] - med["plain"][k] for k in med["plain"]},
        "ratio_tracing_vs_plain": {k: med["tracing"][k] / med["plain"][k] for k in med["plain"]},
        "all_us": res,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(
        json.dumps(
            {
                k: result[k]
                for k in (
                    "median_us_per_call",
                    "added_us_tracing_vs_plain",
                    "ratio_tracing_vs_plain",
                )
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
