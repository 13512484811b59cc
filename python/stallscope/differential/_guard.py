"""A guard against noisy neighbours: on a shared machine another job can slow a run down for
tens of seconds. Two small single-threaded matrix-multiply processes are timed side by side
and compared with one alone; a slowdown above GUARD_LIMIT means the cores were not the runs'
own, and timings taken then are suspect."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Final

#: Side by side over alone above which the machine is taken as busy (two processes on two free
#: cores run at the speed of one alone).
GUARD_LIMIT: Final = 1.1

_PROBE: Final = """
import time, numpy as np
a = np.random.default_rng(0).random((96, 96))
b = a.copy()
for _ in range(200):
    b = a @ b
    b /= b.max()
t = time.perf_counter()
for _ in range({n}):
    b = a @ b
    b /= b.max()
print(time.perf_counter() - t)
"""


def _start(n: int) -> subprocess.Popen[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-c", _PROBE.format(n=n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _seconds(p: subprocess.Popen[str]) -> float:
    out, _ = p.communicate(timeout=60)
    return float(out.strip())


def contention(iterations: int = 4000) -> float:
    """Slowdown of two probe processes run at once against one alone (1.0: no contention; about
    2.0 on a machine whose other work leaves one core free)."""
    alone = _seconds(_start(iterations))
    pair = [_start(iterations), _start(iterations)]
    both = max(_seconds(p) for p in pair)
    return both / alone if alone > 0 else float("inf")
