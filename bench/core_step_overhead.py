"""Step overhead of tracing a real PyTorch CPU training loop: stallscope on, off, and
torch.profiler on, interleaved in one process. Run: python bench/core_step_overhead.py

Workload: the demo's MLP classifier (3 x 512 hidden, batch 64, SGD), DataLoader in-process
(workers=0, so worker scheduling does not add noise), torch.set_num_threads(1).
Each round runs every mode for STEPS steps after WARMUP steps, in a rotated order; the result is
the median step time per mode over all rounds, and the overhead of a mode is
median(mode) / median(off) - 1. The stallscope mode records what the demo records: a step marker,
the batch wait, forward, backward and optimizer regions (5 events per step), written to a run
directory by the writer thread. torch.profiler records CPU ops (its default activity on a CPU
build). Writes bench/results/core_step_overhead.json.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import stallscope
from _guard import check
from stallscope.workloads._demo import WorkloadConfig, build, train

ROUNDS = 10
STEPS = 40
WARMUP = 5
RESULTS = Path(__file__).parent / "results"


def main() -> None:
    import torch

    torch.set_num_threads(1)
    guards = [check("before")]
    cfg = WorkloadConfig(steps=STEPS + WARMUP, batch_size=64, workers=0, prep_us=0)
    model, opt, loss_fn, loader = build(cfg)
    tmp = Path(tempfile.mkdtemp(prefix="stallscope-overhead-"))

    @contextlib.contextmanager
    def mode_ctx(mode: str, r: int) -> Iterator[None]:
        if mode == "stallscope":
            with stallscope.trace(tmp / f"round{r}"):
                yield
        elif mode == "torch.profiler":
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
                yield
        else:
            yield

    modes = ["off", "stallscope", "torch.profiler"]
    steps: dict[str, list[float]] = {m: [] for m in modes}
    per_round: dict[str, list[float]] = {m: [] for m in modes}
    for r in range(ROUNDS):
        order = modes[r % 3 :] + modes[: r % 3]
        for mode in order:
            with mode_ctx(mode, r):
                t = train(cfg, model, opt, loss_fn, loader, traced=(mode == "stallscope"))
            steps[mode] += t[WARMUP:]
            per_round[mode].append(statistics.median(t[WARMUP:]))
    guards.append(check("after"))
    med = {m: statistics.median(v) for m, v in steps.items()}
    overhead = {m: med[m] / med["off"] - 1 for m in modes if m != "off"}
    # Paired per round: each round's modes ran back to back, so their ratio cancels slow drifts.
    paired = {
        m: statistics.median(a / b - 1 for a, b in zip(per_round[m], per_round["off"], strict=True))
        for m in modes
        if m != "off"
    }
    ev = stallscope.load(tmp / "round0")
    events_per_step = ev.height / STEPS if ev.height else 0.0
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "method": f"{ROUNDS} rounds x {STEPS} steps per mode (+{WARMUP} warm-up), rotated order, one process",
        "median_step_ms": {m: round(v * 1e3, 4) for m, v in med.items()},
        "overhead_pct": {m: round(v * 100, 3) for m, v in overhead.items()},
        "paired_round_overhead_pct": {m: round(v * 100, 3) for m, v in paired.items()},
        "torch_profiler_over_stallscope": (
            round(overhead["torch.profiler"] / overhead["stallscope"], 1)
            if overhead["stallscope"] > 0
            else None
        ),
        "stallscope_events_per_step": events_per_step,
        "noise_guard": guards,
        "valid": all(g["quiet"] for g in guards),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "core_step_overhead.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
