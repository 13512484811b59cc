"""Starting small traced gloo jobs: one subprocess per rank, with torchrun's environment."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

WORKER = Path(__file__).with_name("ddp_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(
    world: int,
    out: Path,
    *args: str,
    node_of: Callable[[int], str] | None = None,
    timeout: float = 120,
) -> list[subprocess.CompletedProcess[str]]:
    return finish_job(start_job(world, out, *args, node_of=node_of), timeout)


def start_job(
    world: int, out: Path, *args: str, node_of: Callable[[int], str] | None = None
) -> list[subprocess.Popen[str]]:
    """Start the ranks of a job (finish_job waits for them)."""
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ)
        env.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            RANK=str(r),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(r),
            LOCAL_WORLD_SIZE=str(world),
            OMP_NUM_THREADS="1",
            STALLSCOPE_CLOCK_TIMEOUT_S="5",
        )
        if node_of is not None:
            env["STALLSCOPE_NODE_ID"] = node_of(r)
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), "--out", str(out), *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return procs


def finish_job(
    procs: list[subprocess.Popen[str]], timeout: float = 120
) -> list[subprocess.CompletedProcess[str]]:
    """Wait for every rank (all are killed when one overruns `timeout`)."""
    done = []
    for p in procs:
        try:
            stdout, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        done.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, ""))
    return done
