"""One rank of a small gloo DDP job, traced (run by the torch_dist tests as a subprocess per rank,
the way torchrun starts ranks). Writes what DDP itself reports to <out>/ddp-rank<N>.json."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import sys
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--die-rank", type=int, default=-1)
    p.add_argument("--die-step", type=int, default=-1)
    p.add_argument("--die-how", choices=("exit", "sigkill"), default="exit")
    p.add_argument("--flush-interval", type=float, default=1.0)
    p.add_argument("--all-ops", action="store_true", help="also run every collective once")
    p.add_argument("--subgroups", action="store_true")
    p.add_argument("--trace-ranks", default="", help="comma list; default: every rank traces")
    p.add_argument("--mode", choices=("full", "continuous"), default="full")
    p.add_argument("--window-steps", type=int, default=None)
    p.add_argument("--step-sleep", type=float, default=0.0, help="s of data wait per step")
    a = p.parse_args()

    import torch
    import torch.distributed as dist

    import stallscope
    import stallscope.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(128, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )
    model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=1)
    stallscope.torch.instrument(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ops: dict[str, int] = {}
    fi = 60.0 if rank == a.die_rank and a.die_how == "exit" else a.flush_interval
    failed = None
    traced = a.trace_ranks == "" or str(rank) in a.trace_ranks.split(",")
    options: dict[str, object] = {"flush_interval": fi}
    if a.mode == "continuous":
        options.update(mode="continuous", window_steps=a.window_steps)
    tr = stallscope.trace(a.out, **options) if traced else contextlib.nullcontext()
    wait = stallscope.region("next_batch", category="data")
    with tr:
        try:
            for s in range(a.steps):
                stallscope.step()
                if a.step_sleep:
                    with wait:
                        time.sleep(a.step_sleep)
                if rank == a.die_rank and s == a.die_step:
                    if a.die_how == "sigkill":
                        # a kill loses at most one flush interval: give the writer a few
                        time.sleep(4 * a.flush_interval + 0.5)
                        os.kill(os.getpid(), signal.SIGKILL)
                    os._exit(3)
                x = torch.randn(32, 128)
                model(x).sum().backward()
                opt.step()
                opt.zero_grad()
            if a.all_ops:
                ops = run_all_ops(torch, dist, rank, world)
            if a.subgroups:
                run_subgroups(torch, dist, rank, world)
        except RuntimeError as e:  # a peer died: stop tracing cleanly, report
            failed = str(e)[:300]
    info = model._get_ddp_logging_data()
    rebuilt = [int(v) for v in str(info.get("rebuilt_bucket_sizes", "")).split(",") if v.strip()]
    with open(os.path.join(a.out, f"ddp-rank{rank}.json"), "w") as f:
        json.dump({"rebuilt_bucket_sizes": rebuilt, "ops": ops, "failed": failed}, f)
    if failed is None:
        dist.destroy_process_group()  # a comm hook is registered: shut down cleanly
    sys.exit(0)


def run_all_ops(torch, dist, rank: int, world: int) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Every collective once; returns op -> this rank's payload bytes for the ops gloo supports."""
    done: dict[str, int] = {}
    t = torch.full((1000,), float(rank))

    def attempt(name: str, nbytes: int, fn) -> None:  # type: ignore[no-untyped-def]
        try:
            fn()
            done[name] = nbytes
        except (RuntimeError, NotImplementedError, ValueError):
            pass  # not supported by gloo: every rank raises alike

    attempt("all_reduce", 4000, lambda: dist.all_reduce(t))
    attempt(
        "all_gather", 4000, lambda: dist.all_gather([torch.empty(1000) for _ in range(world)], t)
    )
    attempt(
        "all_gather_into_tensor",
        4000,
        lambda: dist.all_gather_into_tensor(torch.empty(1000 * world), t),
    )
    attempt(
        "reduce_scatter",
        4000 * world,
        lambda: dist.reduce_scatter(torch.empty(1000), [t.clone() for _ in range(world)]),
    )
    attempt(
        "reduce_scatter_tensor",
        4000 * world,
        lambda: dist.reduce_scatter_tensor(torch.empty(1000), torch.cat([t] * world)),
    )
    attempt("broadcast", 4000, lambda: dist.broadcast(t, src=0))
    attempt(
        "all_to_all",
        4000 * world,
        lambda: dist.all_to_all(
            [torch.empty(1000) for _ in range(world)], [t.clone() for _ in range(world)]
        ),
    )
    attempt(
        "all_to_all_single",
        4000 * world,
        lambda: dist.all_to_all_single(torch.empty(1000 * world), torch.cat([t] * world)),
    )
    attempt("barrier", 0, lambda: dist.barrier())
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    # a ring of point-to-point transfers, blocking and non-blocking
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    buf = torch.empty(1000)
    if rank % 2 == 0:
        dist.send(t, nxt)
        dist.recv(buf, prv)
    else:
        dist.recv(buf, prv)
        dist.send(t, nxt)
    reqs = [dist.isend(t, nxt), dist.irecv(buf, prv)]
    for r in reqs:
        r.wait()
    done.update(send=4000, recv=4000, isend=4000, irecv=4000)
    return done


def run_subgroups(torch, dist, rank: int, world: int) -> None:  # type: ignore[no-untyped-def]
    """Two-rank groups within and across the emulated nodes (STALLSCOPE_NODE_ID)."""
    pairs = [[0, 1], [1, 2]]
    groups = [dist.new_group(p) for p in pairs]  # collective: every rank creates every group
    for g, ranks in zip(groups, pairs, strict=False):
        if rank in ranks:
            t = torch.ones(256)
            for _ in range(3):
                dist.all_reduce(t, group=g)
    dist.barrier()


if __name__ == "__main__":
    main()
