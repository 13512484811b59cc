"""Predictor speed: time per configuration of DDP jobs up to 1,024 ranks, and a
10,000-configuration sweep.

Profiles: made-up DDP steps on H100s (NCCL) with 4, 25 and 100 gradient buckets and a straggler
(two rank classes simulated per configuration, whatever the rank count), nodes joined by
InfiniBand NDR, and the V100 trace's 404 all-reduces (tests/data/kineto). Per configuration: the median of
`repeats` calls: the first configuration of a fresh Predictor (its step graph built) and a
configuration after others (the graph re-timed, as in a sweep). The sweep: one predict() call over 10,000 targets (nodes 1..125 x 4
ranks per node x 20 link rates), which builds each step graph once and re-times it.

Targets: <= 1 ms per configuration for DDP up to 1,024 ranks; the sweep <= 10 s on 2 cores.
Results: bench/results/predict_speed.json.

    python bench/predict_speed.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import orjson

from stallscope.predict import PredictWarning, Target, predict, profile_of
from stallscope.predict._predict import Predictor
from stallscope.predict._profile import Bucket, Measured, Phase, Profile

HERE = Path(__file__).resolve().parent
MS = 1_000_000


def made_up(buckets: int) -> Profile:
    """A DDP step: 40 ms forward, 80 ms backward with ``buckets`` equal buckets of 4 MB ready
    evenly, 5 ms optimizer, a straggler 1.1x slower."""
    return Profile(
        measured=Measured(
            ranks=2, nodes=1, ranks_per_node=2, backend="nccl", device="H100-SXM", step_ns=150 * MS
        ),
        phases=[Phase("forward", 40 * MS), Phase("backward", 80 * MS), Phase("optimizer", 5 * MS)],
        buckets=[
            Bucket(k, 4_000_000, 80 * MS * (k + 1) / buckets, measured_ns=1 * MS)
            for k in range(buckets)
        ],
        data_ns=1 * MS,
        host_ns=2 * MS,
        straggler_factor=1.1,
        straggler_ranks=1,
    )


def per_config(prof: Profile, targets: list[Target], repeats: int) -> dict[str, dict[str, float]]:
    """Per rank count: the first configuration of a fresh Predictor (the step graph built) and
    a further one (the graph re-timed: what each configuration of a sweep costs), median ms."""
    out = {}
    for t in targets:
        first, again = [], []
        for k in range(repeats):
            p = Predictor(prof)
            t0 = time.perf_counter()
            p.row(t, p.one(t))
            first.append(time.perf_counter() - t0)
            other = Target(t.nodes, t.ranks_per_node, network=t.network, accumulation=1)
            warm = Target(t.nodes + 1 + k, t.ranks_per_node, network=t.network)
            p.row(warm, p.one(warm))  # one more configuration before timing
            t0 = time.perf_counter()
            p.row(other, p.one(other))
            again.append(time.perf_counter() - t0)
        out[str(t.ranks)] = {
            "first_ms": statistics.median(first) * 1e3,
            "retimed_ms": statistics.median(again) * 1e3,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "predict_speed.json")
    args = ap.parse_args()
    warnings.simplefilter("ignore", PredictWarning)  # far-reaching targets warn; not timed here
    shapes = [(1, 8), (2, 8), (8, 8), (32, 8), (128, 8)]  # 8 .. 1,024 ranks
    res: dict[str, Any] = {
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "per_config_ms": {},
    }
    profiles = {f"{b} buckets": made_up(b) for b in (4, 25, 100)}
    v100 = HERE.parent / "tests" / "data" / "kineto" / "hta_v100_rank1_of2_large"
    profiles["V100 trace, 404 all-reduces"] = profile_of(v100)
    for name, prof in profiles.items():
        targets = [Target(n, g, network="ib-ndr") for n, g in shapes]
        res["per_config_ms"][name] = per_config(prof, targets, args.repeats)
        print(name, res["per_config_ms"][name], flush=True)
    prof = profiles["25 buckets"]
    rates = [10e9 * 1.25**k for k in range(20)]  # 10 Gbit/s .. 690 Gbit/s
    sweep = [Target(n, g, r) for n in range(1, 126) for g in (1, 2, 4, 8) for r in rates]
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        frame = predict(prof, sweep)
        times.append(time.perf_counter() - t0)
    res["sweep"] = {
        "configurations": frame.height,
        "profile": "25 buckets",
        "seconds_runs": times,
        "seconds_median": statistics.median(times),
        "ms_per_config": statistics.median(times) / frame.height * 1e3,
    }
    worst = max(
        v["retimed_ms"]
        for name, d in res["per_config_ms"].items()
        if "trace" not in name
        for v in d.values()
    )
    res["targets"] = {
        "retimed_ms_max": worst,
        "per_config_met": worst <= 1.0,
        "sweep_met": res["sweep"]["seconds_median"] <= 10.0,
    }
    print(orjson.dumps(res["sweep"]).decode(), res["targets"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(res, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
