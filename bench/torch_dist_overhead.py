"""Cost of stallscope's torch.distributed instrumentation per collective call, on the CPU.

    python bench/torch_dist_overhead.py [--calls 3000] [--repeats 5]

A 1-rank gloo group; all_reduce of a 256-float tensor (sync) and with async_op=True + wait,
timed per call in three settings measured side by side in one run, interleaved per repeat:
plain torch, instrumented while no trace records, instrumented while tracing. Reports median
us per call over repeats and the added cost. The wrapper alone: the same wrapper around a
collective that does nothing (ns per call, no gloo in the way), not tracing and tracing.
The 1-minute load average at start and end says how busy the shared machine was.
Results: bench/results/torch_dist_overhead.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
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

    sys.path.insert(0, str(Path(__file__).parent))
    from _guard import check

    guards = [check("before")]
    load_at_start = os.getloadavg()[0]
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
    wrapper = _wrapper_ns(torch, _collectives, out, a.repeats)
    dist.destroy_process_group()
    guards.append(check("after"))
    med = {m: {k: statistics.median(v) for k, v in d.items()} for m, d in res.items()}
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared)",
        "torch": torch.__version__,
        "noise_guard": guards,
        "valid": all(g["quiet"] for g in guards),
        "load_avg_1min_at_start": load_at_start,
        "load_avg_1min_at_end": os.getloadavg()[0],
        "calls": a.calls,
        "repeats": a.repeats,
        "median_us_per_call": med,
        "added_us_tracing_vs_plain": {k: med["tracing"][k] - med["plain"][k] for k in med["plain"]},
        "ratio_tracing_vs_plain": {k: med["tracing"][k] / med["plain"][k] for k in med["plain"]},
        "added_us_instrumented_vs_plain": {
            k: med["instrumented"][k] - med["plain"][k] for k in med["plain"]
        },
        "wrapper_ns_per_call": {k: statistics.median(v) for k, v in wrapper.items()},
        "all_us": res,
        "all_wrapper_ns": wrapper,
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
                    "added_us_instrumented_vs_plain",
                    "ratio_tracing_vs_plain",
                    "wrapper_ns_per_call",
                    "load_avg_1min_at_start",
                    "load_avg_1min_at_end",
                    "valid",
                )
            },
            indent=2,
        )
    )


def _wrapper_ns(torch, collectives, out: Path, repeats: int) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    """ns per call of a collective that does nothing: bare, wrapped (no trace), wrapped while
    tracing (one event recorded per call), interleaved per repeat."""
    import stallscope

    def all_reduce(tensor, op=None, group=None, async_op=False):  # type: ignore[no-untyped-def]
        return None

    wrapped = collectives._wrap("all_reduce", all_reduce)
    t = torch.ones(4)
    n = 20_000

    def run(f) -> float:  # type: ignore[no-untyped-def]
        t0 = time.perf_counter_ns()
        for _ in range(n):
            f(t)
        return (time.perf_counter_ns() - t0) / n

    got: dict[str, list[float]] = {"bare": [], "wrapped": [], "wrapped_tracing": []}
    for rep in range(repeats):
        got["bare"].append(run(all_reduce))
        got["wrapped"].append(run(wrapped))
        with stallscope.trace(out / f"w{rep}", backends=()):
            got["wrapped_tracing"].append(run(wrapped))
    return got


if __name__ == "__main__":
    main()
