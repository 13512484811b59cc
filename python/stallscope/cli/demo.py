"""`stallscope demo`: trace the built-in workload (2-rank DDP over gloo by default) and print
what each step's time went to, per rank."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click


def _run_single(run_dir: Path, steps: int, batch_size: int, workers: int) -> None:
    import stallscope
    from stallscope.workloads._demo import WorkloadConfig, _require_torch, build, train

    torch = _require_torch()
    torch.set_num_threads(1)
    cfg = WorkloadConfig(steps=steps, batch_size=batch_size, workers=workers)
    model, opt, loss_fn, loader = build(cfg)
    with stallscope.trace(run_dir):
        train(cfg, model, opt, loss_fn, loader)


def _run_ddp(run_dir: Path, ranks: int, steps: int, batch_size: int, workers: int) -> None:
    from stallscope.workloads._demo import _require_torch

    _require_torch()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={ranks}",
        "-m",
        "stallscope.workloads._demo",
        "--out",
        str(run_dir),
        "--steps",
        str(steps),
        "--batch-size",
        str(batch_size),
        "--workers",
        str(workers),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, env=env, timeout=600)
    if p.returncode != 0:
        raise click.ClickException(
            f"the {ranks}-rank training run failed (exit status {p.returncode})"
        )


@click.command(short_help="Trace a 2-rank DDP training job and show where each step went.")
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run directory to write (default: a new temporary directory).",
)
@click.option(
    "--ranks",
    type=click.IntRange(1, 16),
    default=2,
    show_default=True,
    help="Training processes (DDP over gloo when more than 1).",
)
@click.option("--steps", type=click.IntRange(2, 100_000), default=20, show_default=True)
@click.option("--batch-size", type=click.IntRange(1, 65_536), default=64, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(0, 64),
    default=1,
    show_default=True,
    help="DataLoader worker processes per rank.",
)
def demo(out: Path | None, ranks: int, steps: int, batch_size: int, workers: int) -> None:
    """Train a small PyTorch model on the CPU under stallscope and show where each step went."""
    import stallscope
    from stallscope.analysis import stall_run_summary, stall_table
    from stallscope.cli.report import print_step_table, shares_line

    run_dir = out if out is not None else Path(tempfile.mkdtemp(prefix="stallscope-demo-"))
    what = f"{ranks}-rank DDP (gloo)" if ranks > 1 else "single-process"
    click.echo(
        f"tracing {steps} steps of {what} training of a small MLP (batch {batch_size}, "
        f"{workers} loader worker(s) per rank) into {run_dir}"
    )
    t0 = time.perf_counter()
    if ranks > 1:
        _run_ddp(run_dir, ranks, steps, batch_size, workers)
    else:
        _run_single(run_dir, steps, batch_size, workers)
    wall = time.perf_counter() - t0
    events = stallscope.load(run_dir)
    info = stallscope.run_info(run_dir)
    dropped = sum(info.drops.values())
    click.echo(
        f"captured {events.height:,} events from {len(info.ranks)} rank(s) in {wall:.1f} s "
        f"({dropped} events dropped)"
    )
    table = stall_table(events)
    print_step_table(table, max_rows=ranks * steps)
    click.echo(f"run: {shares_line(stall_run_summary(table))}")
    click.echo(f"details: stallscope report {run_dir}")
