"""Child-process helpers shared by the launchers (comm bench, test bed)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


def stop_process_groups(procs: list[subprocess.Popen[bytes]], grace_s: float = 3.0) -> None:
    """SIGTERM each live child's process group, then SIGKILL what is left after grace_s (s).
    A child that survives SIGKILL (uninterruptible sleep) is left for the caller's clean-up to
    report: this never blocks for more than grace_s + 5 s per child."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
