"""The local launcher: spawn N ranks of the benchmark on this machine (loopback rendezvous).

Every wait is bounded: the children get ``timeout_s``; if one fails, the others are stopped (they
would otherwise wait for the dead rank until the process-group timeout).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from stallscope._utils.procs import stop_process_groups
from stallscope.comm._harness import SweepConfig


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_local(cfg: SweepConfig, nprocs: int, timeout_s: float | None = None) -> dict[str, Any]:
    """Run the sweep on ``nprocs`` local processes; return rank 0's report.

    Raises RuntimeError naming the failed rank and the tail of its output."""
    if nprocs < 1:
        raise ValueError(f"--nprocs must be >= 1, got {nprocs}")
    cfg.validate()
    limit = timeout_s if timeout_s is not None else cfg.timeout_s + 30.0
    with tempfile.TemporaryDirectory(prefix="stallscope-comm-") as tmp:
        d = Path(tmp)
        (d / "config.json").write_bytes(orjson.dumps(cfg.to_dict()))
        port = free_port()
        procs: list[subprocess.Popen[bytes]] = []
        logs = []
        try:
            for r in range(nprocs):
                env = dict(os.environ)
                env.update(
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                    RANK=str(r),
                    WORLD_SIZE=str(nprocs),
                    LOCAL_RANK=str(r),
                    LOCAL_WORLD_SIZE=str(nprocs),
                    GROUP_RANK="0",
                    NODE_RANK="0",
                    OMP_NUM_THREADS="1",
                )
                log = open(d / f"rank{r}.log", "wb")  # noqa: SIM115 (closed in finally)
                logs.append(log)
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "stallscope.comm._worker",
                            str(d / "config.json"),
                            str(d / "report.json"),
                        ],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            deadline = time.monotonic() + limit
            failed: int | None = None
            while time.monotonic() < deadline:
                codes = [p.poll() for p in procs]
                bad = [r for r, c in enumerate(codes) if c not in (None, 0)]
                if bad:
                    failed = bad[0]
                    break
                if all(c == 0 for c in codes):
                    break
                time.sleep(0.05)
            else:
                stop_process_groups(procs, grace_s=5.0)
                raise RuntimeError(f"bench comm did not finish within {limit:.0f} s; stopped it")
            if failed is not None:
                stop_process_groups(procs, grace_s=5.0)
                for log in logs:
                    log.flush()
                tail = (d / f"rank{failed}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(
                    f"rank {failed} exited with code {procs[failed].returncode}:\n{tail}"
                )
            return dict(orjson.loads((d / "report.json").read_bytes()))
        finally:
            stop_process_groups(procs, grace_s=5.0)
            for log in logs:
                log.close()
