"""`stallscope demo`: trace the built-in workload and print what was captured per step."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import click


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run directory to write (default: a new temporary directory).",
)
@click.option("--steps", type=click.IntRange(2, 100_000), default=30, show_default=True)
@click.option("--batch-size", type=click.IntRange(1, 65_536), default=64, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(0, 64),
    default=2,
    show_default=True,
    help="DataLoader worker processes.",
)
def demo(out: Path | None, steps: int, batch_size: int, workers: int) -> None:
    """Train a small PyTorch model on the CPU under stallscope and show each step."""
    import stallscope
    from stallscope._cli.render import print_frame
    from stallscope._demo.workload import WorkloadConfig, _require_torch, build, train
    from stallscope.analysis import capture_summary

    torch = _require_torch()
    torch.set_num_threads(1)
    run_dir = out if out is not None else Path(tempfile.mkdtemp(prefix="stallscope-demo-"))
    cfg = WorkloadConfig(steps=steps, batch_size=batch_size, workers=workers)
    model, opt, loss_fn, loader = build(cfg)
    click.echo(
        f"tracing {steps} steps of a {cfg.depth}-layer MLP (batch {batch_size}, "
        f"{workers} loader workers) into {run_dir}"
    )
    t0 = time.perf_counter()
    with stallscope.trace(run_dir):
        train(cfg, model, opt, loss_fn, loader)
    wall = time.perf_counter() - t0
    events = stallscope.load(run_dir)
    summary = capture_summary(events)
    ms = {
        c: (summary[c] / 1e6).round(2) for c in ("step_ns", "data_wait_ns", "compute_ns", "host_ns")
    }
    table = summary.select("rank", "step", "events", "regions").with_columns(
        step_ms=ms["step_ns"],
        data_wait_ms=ms["data_wait_ns"],
        compute_ms=ms["compute_ns"],
        host_ms=ms["host_ns"],
    )
    print_frame(table, title=f"captured per step ({events.height} events, {wall:.1f} s)")
    info = stallscope.run_info(run_dir)
    dropped = sum(info.drops.values())
    click.echo(f"run directory: {run_dir} ({len(info.ranks)} rank(s); {dropped} events dropped)")
