"""How `stallscope demo` runs its training job: on the test bed (emulated nodes joined by links
shaped to a rate; needs root and iproute2), over loopback with torchrun, or as one process. The
job is the built-in workload (stallscope.workloads._demo); its rank 0 reports each step to a
file that the caller's progress display reads."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

Progress = Callable[[int, int], None]  # (steps done, steps in all)
POLL_S = 0.2  # s between reads of the progress file


@dataclass
class Job:
    ranks: int
    steps: int
    batch_size: int
    workers: int

    def argv(self, run_dir: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "stallscope.workloads._demo",
            "--out",
            str(run_dir),
            "--steps",
            str(self.steps),
            "--batch-size",
            str(self.batch_size),
            "--workers",
            str(self.workers),
        ]


def testbed_usable() -> str | None:
    """None when the test bed can run here, else why not."""
    from stallscope.testbed import TestbedError, require_privileges

    try:
        require_privileges()
    except TestbedError as e:
        return str(e)
    return None


def describe(job: Job, network: str, rate: str) -> str:
    """What the capture step runs, in words."""
    if job.ranks == 1:
        return "one training process"
    if network == "testbed":
        return (
            f"{job.ranks}-rank DDP (gloo) on {job.ranks} emulated nodes, each node's link shaped "
            f"to {rate} (stallscope testbed)"
        )
    return f"{job.ranks}-rank DDP (gloo) on this machine, over loopback (torchrun)"


def _watch(progress_file: Path, done: threading.Event, report: Progress) -> None:
    """Report the workload's progress until `done` is set."""
    last = ""
    while not done.wait(POLL_S):
        try:
            text = progress_file.read_text().strip()
        except OSError:
            continue
        if text and text != last:
            last = text
            a, b = text.split()
            report(int(a), int(b))


def run(job: Job, run_dir: Path, network: str, rate: str, report: Progress) -> float:
    """Run the job, tracing every rank into `run_dir`; its wall time in seconds.
    ClickException with the ranks' output when it fails."""
    with tempfile.TemporaryDirectory(prefix="stallscope-demo-") as tmp:
        progress_file = Path(tmp) / "progress"
        env = {"OMP_NUM_THREADS": "1", "STALLSCOPE_DEMO_PROGRESS": str(progress_file)}
        done = threading.Event()
        watcher = threading.Thread(target=_watch, args=(progress_file, done, report), daemon=True)
        watcher.start()
        t0 = time.perf_counter()
        try:
            if network == "testbed" and job.ranks > 1:
                _on_testbed(job, run_dir, rate, env)
            else:
                _here(job, run_dir, env)
        finally:
            done.set()
            watcher.join()
        return time.perf_counter() - t0


def _here(job: Job, run_dir: Path, env: dict[str, str]) -> None:
    argv = job.argv(run_dir)
    if job.ranks > 1:
        argv = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={job.ranks}",
            *argv[1:],
        ]
    p = subprocess.run(
        argv,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if p.returncode != 0:
        raise click.ClickException(
            f"the training run failed (exit status {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}"
        )


def _on_testbed(job: Job, run_dir: Path, rate: str, env: dict[str, str]) -> None:
    from stallscope.testbed import Testbed, TestbedError

    try:
        with Testbed(nodes=job.ranks, ranks_per_node=1, rate=rate) as tb:
            result = tb.run(job.argv(run_dir), timeout_s=600, env=env)
    except TestbedError as e:
        raise click.ClickException(f"the test bed failed: {e}") from None
    if not result.ok:
        bad = next((r for r, c in enumerate(result.returncodes) if c != 0), 0)
        why = "timed out" if result.timed_out else f"exit statuses {result.returncodes}"
        raise click.ClickException(
            f"the training run on the test bed failed ({why}); rank {bad}'s output:\n"
            f"{result.outputs[bad][-3000:]}"
        )
