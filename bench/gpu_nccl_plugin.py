"""GPU check of the NCCL profiler plugin: real NCCL loads libnccl-profiler-stallscope.so.

    python bench/gpu_nccl_plugin.py [--world N] [--iters 20]

Runs N ranks (default: min(2, GPUs); 1 rank on a single GPU), each with the NCCL backend, two
communicators (the world group and a second group over the same ranks), and a fixed list of
collectives of several sizes, traced by stallscope. Then it checks, per rank and communicator,
the plugin's events against what was issued and against NCCL's own sequence numbers
(collectives of one type are numbered 0, 1, 2, ... per communicator), that the end of each
transfer comes from the GPU (timing=gpu) and lies after its start, and compares each
all-reduce's duration with CUDA events around the same call. Each iteration also sends and
receives one tensor around the ring (to itself on one rank) and checks one p2p event per Send /
Recv with gapless sequence numbers. On one GPU only the p2p part can pass: NCCL turns a one-rank
collective into a device copy and calls no profiler hook for it (seen with NCCL 2.28.9). Results go to
bench/results/gpu_nccl_plugin.json. Without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "gpu_nccl_plugin.json"
SIZES = (1 << 10, 1 << 16, 1 << 20, 1 << 24)  # bytes per all-reduce


def _no_gpu(reason: str) -> None:
    print(f"no GPU: {reason}; the NCCL plugin GPU check did not run (CPU tests cover the ABI).")
    sys.exit(0)


def _rank_main(rank: int, world: int, port: int, out: str, iters: int, q: object) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
    )
    import torch
    import torch.distributed as dist

    import stallscope
    import stallscope.torch

    plugin = stallscope.torch.enable_plugin()  # before NCCL creates any communicator
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", device_id=dev)
    stallscope.torch.instrument(None)
    second = dist.new_group(list(range(world)))
    issued: dict[str, int] = {}
    cuda_ms: list[tuple[int, float]] = []
    with stallscope.trace(out):
        for _ in range(iters):
            for nbytes in SIZES:
                t = torch.ones(nbytes // 4, device=dev)
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                dist.all_reduce(t)
                b.record()
                b.synchronize()
                cuda_ms.append((nbytes, a.elapsed_time(b)))
                issued["AllReduce@world"] = issued.get("AllReduce@world", 0) + 1
            t = torch.ones(1 << 18, device=dev)
            dist.all_reduce(t, group=second)
            issued["AllReduce@second"] = issued.get("AllReduce@second", 0) + 1
            g = torch.empty((1 << 18) * world, device=dev)
            dist.all_gather_into_tensor(g, t)
            issued["AllGather@world"] = issued.get("AllGather@world", 0) + 1
            dist.broadcast(t, src=0, group=second)
            issued["Broadcast@second"] = issued.get("Broadcast@second", 0) + 1
            # A ring exchange (to itself on one rank: NCCL runs it as a p2p kernel, unlike a
            # one-rank collective, which it turns into a device copy with no profiler events).
            peer_to, peer_from = (rank + 1) % world, (rank - 1) % world
            r = torch.empty_like(t)
            ops = [dist.P2POp(dist.isend, t, peer_to), dist.P2POp(dist.irecv, r, peer_from)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            issued["Send"] = issued.get("Send", 0) + 1
            issued["Recv"] = issued.get("Recv", 0) + 1
        torch.cuda.synchronize()
    nccl_version = ".".join(map(str, torch.cuda.nccl.version()))
    dist.destroy_process_group()
    q.put(
        {"rank": rank, "issued": issued, "cuda_ms": cuda_ms, "plugin": plugin, "nccl": nccl_version}
    )  # type: ignore[attr-defined]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--world", type=int, default=0)
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    try:
        import torch
    except ImportError:
        _no_gpu("torch is not installed")
    if not torch.cuda.is_available():
        _no_gpu("torch.cuda.is_available() is False (no GPU or no driver here)")
    import polars as pl
    import torch.multiprocessing as mp

    import stallscope
    from stallscope._schema import parse_detail

    world = a.world or min(2, torch.cuda.device_count())
    out = tempfile.mkdtemp(prefix="stallscope-gpu-nccl-")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [
        ctx.Process(target=_rank_main, args=(r, world, port, out, a.iters, q)) for r in range(world)
    ]
    for pr in procs:
        pr.start()
    reports = sorted((q.get(timeout=600) for _ in procs), key=lambda r: r["rank"])
    for pr in procs:
        pr.join()
    ev = stallscope.load(out)
    plug = ev.filter(parse_detail(pl.col("detail"), "source") == "nccl_plugin")
    coll = plug.filter(pl.col("kind") == "collective").with_columns(
        comm=parse_detail(pl.col("detail"), "comm"),
        group=parse_detail(pl.col("detail"), "group"),
        timing=parse_detail(pl.col("detail"), "timing"),
        algo=parse_detail(pl.col("detail"), "algo"),
        proto=parse_detail(pl.col("detail"), "proto"),
    )
    p2p = plug.filter(pl.col("kind") == "p2p").with_columns(
        timing=parse_detail(pl.col("detail"), "timing")
    )
    checks: dict[str, object] = {}
    per = (
        coll.group_by("rank", "group", "name")
        .agg(
            n=pl.len(),
            seq_min=pl.col("correlation").min(),
            seq_max=pl.col("correlation").max(),
            gpu=(pl.col("timing") == "gpu").sum(),
            bad=(pl.col("end_ns") < pl.col("start_ns")).sum(),
        )
        .sort("rank", "group", "name")
    )
    # NCCL numbers each collective type per communicator 0..n-1: a gapless range = nothing lost
    checks["seq_gapless"] = (
        bool((per["seq_max"] - per["seq_min"] + 1 == per["n"]).all()) if per.height else False
    )
    issued_coll = sum(n for r in reports for k, n in r["issued"].items() if "@" in k)
    issued_p2p = sum(n for r in reports for k, n in r["issued"].items() if "@" not in k)
    checks["events_vs_issued"] = {"plugin_collectives": coll.height, "issued": issued_coll}
    if world == 1:
        checks["events_vs_issued"]["note"] = (
            "one rank: NCCL runs each collective as a device copy and emits no profiler event"
        )
    # p2p: one event per Send / Recv issued; NCCL numbers a communicator's p2p ops 0, 1, 2, ...
    p2p_per = p2p.group_by("rank").agg(
        n=pl.len(),
        seq_min=pl.col("correlation").min(),
        seq_max=pl.col("correlation").max(),
        bad=(pl.col("end_ns") < pl.col("start_ns")).sum(),
    )
    checks["p2p"] = {
        "plugin_events": p2p.height,
        "issued": issued_p2p,
        "equal": p2p.height == issued_p2p,
        "seq_gapless": bool((p2p_per["seq_max"] - p2p_per["seq_min"] + 1 == p2p_per["n"]).all())
        if p2p_per.height
        else False,
        "timing": p2p.group_by("timing").len().rows(),
        "end_before_start": int(p2p_per["bad"].sum()) if p2p_per.height else 0,
        "bytes": sorted(set(p2p["bytes"].to_list())),
    }
    checks["groups"] = plug.filter(pl.col("name") == "ncclGroup").height
    checks["gpu_timed_fraction"] = (
        float(per["gpu"].sum() / max(per["n"].sum(), 1)) if per.height else 0.0
    )
    checks["end_before_start"] = int(per["bad"].sum()) if per.height else 0
    ar = coll.filter(pl.col("name") == "AllReduce").with_columns(
        us=(pl.col("end_ns") - pl.col("start_ns")) / 1e3
    )
    cuda = pl.DataFrame(
        [(r["rank"], b, ms * 1e3) for r in reports for b, ms in r["cuda_ms"]],
        schema={"rank": pl.Int32, "bytes": pl.Int64, "cuda_us": pl.Float64},
        orient="row",
    )
    cmp = (
        ar.group_by("bytes")
        .agg(plugin_us=pl.col("us").median())
        .join(cuda.group_by("bytes").agg(cuda_us=pl.col("cuda_us").median()), on="bytes")
        .sort("bytes")
    )
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(0),
        "world": world,
        "nccl": reports[0]["nccl"],
        "plugin": reports[0]["plugin"],
        "checks": checks,
        "per_comm": per.to_dicts(),
        "allreduce_median_us_plugin_vs_cuda_events": cmp.to_dicts(),
        "algos": coll.group_by("algo", "proto").len().to_dicts(),
        "run_dir": out,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    if plug.height == 0:
        print(
            "NO plugin events: NCCL did not load the plugin (NCCL older than 2.27.3 knows no v4+ "
            "symbol; or NCCL_PROFILER_PLUGIN was overridden); see NCCL_DEBUG=INFO output",
            file=sys.stderr,
        )
        sys.exit(1)
    ok = checks["p2p"]["equal"] and checks["p2p"]["seq_gapless"]  # type: ignore[index]
    if world > 1:
        ok = ok and checks["seq_gapless"] and coll.height == issued_coll
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
