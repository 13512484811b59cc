"""Stall table at 10 M events: a synthetic native run loaded and tabled (target: <= 2 s, 2 cores).

Writes a synthetic run directory (rank-NNNNN.parquet files in the event schema, written the way
the native writer writes them) with a realistic mix per step and rank: a step marker, a data wait
split into fetch and prep by a loader thread, nested forward / backward / optimizer regions, one
launch (runtime) event per kernel, compute kernels on two streams, NCCL kernels on a comm stream,
copies, and bucketed all-reduce collectives across two nodes with per-rank arrival skew.

Each measurement runs in a fresh process (so peak RSS is the measurement's own):
``load`` = stallscope.load(run) then stall_table(events); ``scan`` = stall_table(stallscope.scan(run))
(lazy: only the columns the table needs are read). Reports the median of --runs and peak RSS.

    python bench/stall_table_10m.py [--events 10000000] [--runs 5] [--dir /tmp/ss-bench-10m]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from _guard import check

STEP_NS = 100_000_000  # 100 ms per step
LAYERS = 20
KERNELS = 1_200  # compute kernels per step and rank
COLLECTIVES = 10  # gradient buckets per step
COPIES = 20
# Bumped whenever the writer's file format changes, so that a stale run directory is rewritten.
FORMAT = "writer-2: Enum-marked uint8 dictionaries, _PARQUET_OPTIONS; run.json with clock offsets"


def per_step_events() -> int:
    # marker + data wait + fetch + prep + 3 phase regions + 2 x layers + kernels + launches
    # + comm kernels + collectives + copies
    return 1 + 1 + 2 + 3 + 2 * LAYERS + 2 * KERNELS + COLLECTIVES + COLLECTIVES + COPIES


def rank_frame(rank: int, steps: int, rng: np.random.Generator) -> pl.DataFrame:
    from stallscope._schema import SCHEMA

    t0 = 1_700_000_000_000_000_000 + np.arange(steps, dtype=np.int64) * STEP_NS
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("kind", "cat", "name", "s", "e", "lane")}
    cols.update({"corr": [], "bytes": [], "detail": [], "device": []})

    def add(kind, cat, name, s, e, lane, corr=0, nbytes=0, detail=None, device=-1):  # type: ignore[no-untyped-def]
        n = s.size
        cols["kind"].append(np.full(n, kind, dtype=object))
        cols["cat"].append(np.full(n, cat, dtype=object))
        cols["name"].append(
            name if isinstance(name, np.ndarray) else np.full(n, name, dtype=object)
        )
        cols["s"].append(s.ravel())
        cols["e"].append(e.ravel())
        cols["lane"].append(np.broadcast_to(lane, s.shape).ravel().astype(np.int32))
        cols["corr"].append(np.broadcast_to(corr, s.shape).ravel().astype(np.int64))
        cols["bytes"].append(np.full(n, nbytes, dtype=np.int64))
        cols["detail"].append(
            detail if isinstance(detail, np.ndarray) else np.full(n, detail, dtype=object)
        )
        cols["device"].append(np.full(n, device, dtype=np.int16))

    main, worker = 1000 + rank, 2000 + rank
    add("step", "host", "step", t0, t0, main, corr=np.arange(steps))
    wait = rng.integers(500_000, 3_000_000, steps)
    add("data_wait", "data", "next_batch", t0, t0 + wait, main)
    add("region", "data_fetch", "read", t0, t0 + wait // 2, worker)
    add("region", "data_prep", "decode", t0 + wait // 2, t0 + wait, worker)
    f0, b0, o0 = t0 + 3_000_000, t0 + 40_000_000, t0 + 82_000_000
    add("region", "compute", "forward", f0, b0, main)
    add("region", "compute", "backward", b0, o0, main)
    add("region", "compute", "optimizer", o0, t0 + 95_000_000, main)
    for base, length, name in ((f0, b0 - f0, "fwd_layer"), (b0, o0 - b0, "bwd_layer")):
        edges = base[:, None] + (np.arange(LAYERS + 1) * (length[0] // LAYERS))[None, :]
        add("region", "compute", name, edges[:, :-1], edges[:, 1:], main)
    # Kernels: one slot each over [3 ms, 95 ms); launched 5-20 us before they start.
    slot = 92_000_000 // KERNELS
    ks = t0[:, None] + 3_000_000 + np.arange(KERNELS)[None, :] * slot
    ks = ks + rng.integers(0, slot // 4, ks.shape)
    ke = ks + rng.integers(slot // 4, slot, ks.shape)
    corr = np.arange(steps * KERNELS, dtype=np.int64).reshape(steps, KERNELS) + 1
    knames = np.array([f"void gemm_kernel_{i}<float>" for i in range(40)], dtype=object)
    add(
        "kernel",
        "compute",
        knames[rng.integers(0, 40, ks.size)],
        ks,
        ke,
        7 + (corr % 2),
        corr=corr,
        device=rank % 8,
    )
    launch = ks - rng.integers(5_000, 20_000, ks.shape)
    add("runtime", "host", "cudaLaunchKernel", launch, launch + 4_000, main, corr=corr)
    # Buckets: all-reduce over 2 nodes, arrivals skewed per rank, NCCL kernel alongside.
    cs = b0[:, None] + np.arange(COLLECTIVES)[None, :] * 4_000_000
    cs = cs + rng.integers(0, 500_000, cs.shape)
    ce = (b0[:, None] + np.arange(COLLECTIVES)[None, :] * 4_000_000) + 3_000_000
    seq = np.arange(steps * COLLECTIVES, dtype=np.int64).reshape(steps, COLLECTIVES)
    add(
        "collective",
        "comm",
        "all_reduce",
        cs,
        ce,
        main,
        corr=seq,
        nbytes=25 << 20,
        detail="group=world;group_size=8;nnodes=2",
    )
    add("kernel", "comm", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", cs, ce, 13, device=rank % 8)
    ms = t0[:, None] + 95_000_000 + np.arange(COPIES)[None, :] * 200_000
    add(
        "memcpy",
        "memcpy",
        "Memcpy DtoH (Device -> Pinned)",
        ms,
        ms + 100_000,
        9,
        nbytes=1 << 20,
        device=rank % 8,
    )
    n = sum(a.size for a in cols["s"])
    frame = pl.DataFrame(
        {
            "rank": np.full(n, rank, dtype=np.int32),
            "pid": np.full(n, 40_000 + rank, dtype=np.int32),
            "kind": pl.Series(np.concatenate(cols["kind"]).tolist(), dtype=pl.String),
            "category": pl.Series(np.concatenate(cols["cat"]).tolist(), dtype=pl.String),
            "name": pl.Series(np.concatenate(cols["name"]).tolist(), dtype=pl.String),
            "start_ns": np.concatenate(cols["s"]),
            "end_ns": np.concatenate(cols["e"]),
            "lane": np.concatenate(cols["lane"]),
            "device": np.concatenate(cols["device"]),
            "correlation": np.concatenate(cols["corr"]),
            "bytes": np.concatenate(cols["bytes"]),
            "value": pl.Series([None] * n, dtype=pl.Float64),
            "detail": pl.Series(np.concatenate(cols["detail"]).tolist(), dtype=pl.String),
        },
        strict=False,
    )
    # Row order as the native writer leaves it: one chunk per flush interval (1 s), in it the
    # rings of each thread one after another, each in recording order (a region is recorded
    # when it ends): not sorted by start.
    chunk = (pl.col("end_ns") - int(t0[0])) // 1_000_000_000
    return frame.cast(SCHEMA).sort(chunk, "lane", "end_ns")  # type: ignore[arg-type]


def to_native_table(frame: pl.DataFrame) -> pa.Table:
    """`frame` as the native writer's Arrow table (its very schema: kind / category
    dictionary-encoded on the schema's value lists with uint8 codes and marked as Polars Enums,
    names and details plain strings)."""
    from stallscope.capture._writer import _ARROW_SCHEMA, _CATEGORY_DICT, _KIND_DICT

    table = frame.to_arrow()
    cols = {name: table.column(name) for name in table.column_names}
    for col, values in (("kind", _KIND_DICT), ("category", _CATEGORY_DICT)):
        codes = frame[col].to_physical().to_numpy().astype(np.uint8)
        cols[col] = pa.DictionaryArray.from_arrays(codes, values, ordered=True)
    for col in ("name", "detail"):
        cols[col] = cols[col].cast(pa.string())
    return pa.Table.from_arrays([cols[f.name] for f in _ARROW_SCHEMA], schema=_ARROW_SCHEMA)


def generate(run: Path, events: int, ranks: int) -> int:
    import pyarrow.parquet as pq

    from stallscope.io._event_files import PARQUET_OPTIONS

    run.mkdir(parents=True, exist_ok=True)
    steps = max(2, events // (ranks * per_step_events()))
    total = 0
    for r in range(ranks):
        df = rank_frame(r, steps, np.random.default_rng(r))
        # One row group per 1 s flush interval, as RankWriter's merged file has.
        pq.write_table(
            to_native_table(df),
            run / f"rank-{r:05d}.parquet",
            **PARQUET_OPTIONS,  # type: ignore[arg-type]
            row_group_size=10 * per_step_events(),
        )
        total += df.height
    write_run_json(run, ranks, steps)
    meta = {"events": total, "ranks": ranks, "steps": steps, "format": FORMAT}
    (run / "bench.json").write_text(json.dumps(meta))
    return total


def write_run_json(run: Path, ranks: int, steps: int) -> None:
    """run.json as a traced 2-node job leaves it: one entry per rank, stopped, with the clock
    offsets to rank 0 measured at start and stop (a few us apart, drifting by 1 ppm), so `load`
    aligns the clocks as it does for a real multi-node run."""
    from stallscope.io._run_dir import stem_for
    from stallscope.io._run_json import FORMAT as RUN_FORMAT
    from stallscope.io._run_json import FORMAT_VERSION

    t_start = 1_700_000_000_000_000_000
    t_stop = t_start + steps * STEP_NS
    procs = {}
    for r in range(ranks):
        o = 0 if r == 0 else 3_000 * r - 5_000  # ns
        drift = 0 if r == 0 else (steps * STEP_NS) // 1_000_000 * (1 if r % 2 else -1)
        samples = [
            {"local_ns": t, "offset_ns": off, "error_ns": 2_000, "rtt_ns": 4_000}
            for t, off in ((t_start, o), (t_stop, o + drift))
        ]
        procs[stem_for(r)] = {
            "status": "stopped",
            "rank": r,
            "world_size": ranks,
            "local_rank": r % 2,
            "local_world_size": 2,
            "node_rank": r // 2,
            "pid": 40_000 + r,
            "clock": {"source": "CLOCK_MONOTONIC", "unit": "ns", "reference_rank": 0}
            | ({"offsets": samples} if r else {}),
            "drops": {"ring_full": 0, "no_thread_slot": 0, "nesting_too_deep": 0},
        }
    doc = {"format": RUN_FORMAT, "format_version": FORMAT_VERSION, "processes": procs}
    (run / "run.json").write_text(json.dumps(doc, indent=2))


def peak_rss() -> int:
    """Peak resident memory (bytes) of this process (VmHWM: unlike ru_maxrss, not inherited
    from the parent across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(run: Path, mode: str) -> dict[str, float]:
    import stallscope
    from stallscope.analysis import stall_table

    c0 = time.process_time()
    t0 = time.perf_counter()
    if mode == "load":
        events = stallscope.load(run)
        t1 = time.perf_counter()
        c1 = time.process_time()
        table = stall_table(events)
    else:
        t1, c1 = t0, c0
        table = stall_table(stallscope.scan(run))
    t2 = time.perf_counter()
    cpu = time.process_time() - c0  # every thread of the process
    rss = peak_rss()
    return {
        "total_s": t2 - t0,
        "load_s": t1 - t0,
        "table_s": t2 - t1,
        "peak_rss": rss,
        "cpu_s": cpu,
        "table_cpu_s": time.process_time() - c1,
        "rows": table.height,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/ss-bench-10m"))
    ap.add_argument("--threads", type=int, default=2, help="POLARS_MAX_THREADS for measurements")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "stall_table_10m.json"
    )
    ap.add_argument("--measure", choices=["load", "scan"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:
        print(json.dumps(measure(a.dir, a.measure)))
        return
    meta = a.dir / "bench.json"
    old = json.loads(meta.read_text()) if meta.exists() else {}
    if old.get("events", 0) < 0.95 * a.events or old.get("format") != FORMAT:
        t = time.perf_counter()
        n = generate(a.dir, a.events, a.ranks)
        print(f"generated {n:,} events in {time.perf_counter() - t:.1f} s into {a.dir}")
    info = json.loads(meta.read_text())
    env = {**os.environ, "POLARS_MAX_THREADS": str(a.threads)}
    guards = [check("before")]
    results: dict[str, list[dict[str, float]]] = {"load": [], "scan": []}
    for i in range(a.runs):
        for mode in results:  # interleaved, so load shifts hit both modes alike
            out = subprocess.run(
                [sys.executable, __file__, "--dir", str(a.dir), "--measure", mode],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results[mode].append(r)
            print(
                f"run {i} {mode}: total {r['total_s']:.3f} s (load {r['load_s']:.3f}, "
                f"table {r['table_s']:.3f}), cpu {r['cpu_s']:.3f} s, peak RSS {r['peak_rss'] / 2**20:.0f} MiB"
            )
    guards.append(check("after"))
    summary = {
        mode: {
            "median_total_s": statistics.median(r["total_s"] for r in rs),
            "median_load_s": statistics.median(r["load_s"] for r in rs),
            "median_table_s": statistics.median(r["table_s"] for r in rs),
            "min_total_s": min(r["total_s"] for r in rs),
            "median_cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "median_table_cpu_s": statistics.median(r["table_cpu_s"] for r in rs),
            "peak_rss_mib": max(r["peak_rss"] for r in rs) / 2**20,
        }
        for mode, rs in results.items()
    }
    doc = {
        "benchmark": "stall_table_10m",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "events": info["events"],
        "ranks": info["ranks"],
        "steps_per_rank": info["steps"],
        "runs": a.runs,
        "polars_max_threads": a.threads,
        "cpus": os.cpu_count(),
        "loadavg_1m_at_end": os.getloadavg()[0],
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "polars": pl.__version__,
        "noise_guard": guards,
        "valid": all(g["quiet"] for g in guards),
        "summary": summary,
        "runs_detail": results,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    for mode, s in summary.items():
        print(
            f"{mode}: median {s['median_total_s']:.3f} s (cpu {s['median_cpu_s']:.3f} s), "
            f"peak RSS {s['peak_rss_mib']:.0f} MiB"
        )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
