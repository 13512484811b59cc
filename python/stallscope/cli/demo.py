"""`stallscope demo`: the story in a few minutes. Trace a 2-rank DDP job (the built-in CPU
workload; on emulated nodes with shaped links when this machine allows, else over loopback), show
where each step's time went and what the categories mean, look ahead (a prediction for 4 and 8
nodes, a cloud recommendation: when this stallscope has those tools) and write the HTML report."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from stallscope.cli import _demo_capture as capture
from stallscope.cli import _demo_outlook as outlook


class _Story:
    """Numbered steps, each with a heading; a live progress bar while the job trains (on a
    terminal; plain lines elsewhere)."""

    def __init__(self, steps: list[str]) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.steps = steps
        self.at = 0

    def step(self, what: str) -> None:
        self.at += 1
        self.console.print(f"\n[bold][{self.at}/{len(self.steps)}] {what}[/bold]", soft_wrap=True)

    def say(self, text: str) -> None:
        self.console.print(f"  {text}", soft_wrap=True)

    def training(self, run: Callable[[capture.Progress], float], total: int) -> float:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        if not self.console.is_terminal:
            seen: list[int] = []

            def plain(done: int, n: int) -> None:
                if (done in (1, n) or done % 5 == 0) and done not in seen:
                    seen.append(done)
                    self.say(f"step {done}/{n}")

            return run(plain)
        with Progress(
            SpinnerColumn(),
            TextColumn("  {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        ) as bar:
            task = bar.add_task("starting the ranks", total=total)

            def live(done: int, n: int) -> None:
                bar.update(task, completed=done, total=n, description="training")

            return run(live)


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
@click.option(
    "--network",
    type=click.Choice(["auto", "testbed", "loopback"]),
    default="auto",
    show_default=True,
    help="Where the ranks talk: emulated nodes with shaped links (testbed: root and iproute2), "
    "or this machine's loopback; auto: the test bed when it can run here.",
)
@click.option(
    "--rate",
    default="500mbit",
    show_default=True,
    help="Each emulated node's link rate on the test bed (tc units).",
)
def demo(
    out: Path | None,
    ranks: int,
    steps: int,
    batch_size: int,
    workers: int,
    network: str,
    rate: str,
) -> None:
    """Train a small PyTorch model on the CPU under stallscope and tell the story: where each
    step went, what the categories mean, what other clusters would do, and the HTML report."""
    from stallscope.workloads._demo import _require_torch

    _require_torch()
    why_not = capture.testbed_usable() if ranks > 1 and network != "loopback" else None
    if network == "testbed" and why_not:
        raise click.ClickException(f"--network testbed: {why_not}")
    net = "testbed" if ranks > 1 and network != "loopback" and why_not is None else "loopback"
    if out is not None:
        from stallscope.cli._paths import output_dir
        from stallscope.cli.profile import earlier_run

        if earlier := earlier_run(out):
            raise click.ClickException(
                f"{out} already holds a run ({earlier}); choose a new --out directory"
            )
        output_dir(out)
    run_dir = out if out is not None else Path(tempfile.mkdtemp(prefix="stallscope-demo-"))
    job = capture.Job(ranks, steps, batch_size, workers)
    predict = outlook.predictor() is not None and ranks > 1
    recommend = outlook.recommender() is not None
    titles = ["capture", "stall table"]
    titles += ["prediction"] * predict + ["recommendation"] * recommend + ["HTML report"]
    story = _Story(titles)
    story.console.print(
        f"[bold]stallscope demo[/bold]: trace {steps} steps of a small model's training, then "
        "see where each step's time went",
        soft_wrap=True,
    )

    story.step(f"capture: {capture.describe(job, net, rate)}")
    if network == "auto" and ranks > 1 and why_not:
        story.say(f"(loopback: {why_not.split(':')[0]}; run as root for emulated nodes)")
    story.say(
        f"{steps} steps of an MLP on synthetic images (batch {batch_size}, {workers} loader "
        f"worker(s) per rank), traced into {run_dir}"
    )
    wall = story.training(lambda report: capture.run(job, run_dir, net, rate, report), steps)
    import stallscope
    from stallscope.cli._source import load_run

    loaded = load_run(run_dir)
    info = stallscope.run_info(run_dir)
    story.say(
        f"captured {loaded.events.height:,} events from {len(info.ranks)} rank(s) in {wall:.1f} s "
        f"({sum(info.drops.values())} events dropped)"
    )

    story.step("stall table: where each step's time went, per rank (ms)")
    _stall_table(story, loaded, ranks * steps)

    frames: dict[str, Any] = {}
    if predict:
        nodes = " and ".join(map(str, outlook.PREDICT_NODES))
        story.step(f"prediction: the same job on {nodes} nodes, each linked at {rate}")
        _show(story, outlook.predict(run_dir, 1, _rate_bps(rate)), frames, "prediction")
    if recommend:
        story.step(f"recommendation: {outlook.JOB_STEPS:,} steps of this job in the cloud")
        _show(story, outlook.recommend(run_dir), frames, "pareto")

    story.step("HTML report")
    from stallscope.cli.report_html import write_html_report

    page = write_html_report(loaded, run_dir / "report.html", None, frames=frames)
    story.say(f"{page}  (one file: open it in a browser)")
    story.console.print(
        f"\ndetails: stallscope report {run_dir}    "
        f"whole trace: stallscope export {run_dir} --perfetto trace.json.gz",
        soft_wrap=True,
    )


def _stall_table(story: _Story, loaded: Any, max_rows: int) -> None:
    from stallscope.analysis import STALL_CATEGORIES, stall_run_summary, stall_table
    from stallscope.cli.report import legend_lines, print_step_table, shares_line

    table = stall_table(loaded.events)
    print_step_table(table, max_rows=max_rows)
    story.say(f"run: {shares_line(stall_run_summary(table))}")
    for line in loaded.steps_found:
        story.say(f"steps: {line}")
    story.console.print("\n  what the categories mean (docs/stall-categories.md):")
    for line in legend_lines(STALL_CATEGORIES):
        story.console.print(line, soft_wrap=True)


def _show(story: _Story, got: outlook.Outlook, frames: dict[str, Any], key: str) -> None:
    for note in got.notes:
        story.say(f"note: {note}")
    if got.error:
        story.say(f"not available: {got.error}")
        return
    for line in got.lines:
        story.say(line)
    if got.frame is not None:
        frames[key] = got.frame


def _rate_bps(rate: str) -> float | None:
    from stallscope.testbed._net import parse_rate

    try:
        return float(parse_rate(rate))
    except Exception:
        return None
