"""Noisy-neighbour guard (docs/architecture.md section 10): time a small single-threaded matmul
process alone, then two side by side; if the pair is more than ``limit`` times slower than one
alone, the machine's cores are not all ours and a measurement taken now should be discarded.

Each process starts its fixed amount of work at one shared wall-clock instant (so interpreter start
is not timed and the two really overlap) and reports its own elapsed time. Every wait is bounded.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

_WORK = """
import sys, time
import numpy as np
n, reps, start_at = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
a = np.random.default_rng(0).random((n, n))
b = a @ a  # warm (page in, BLAS init)
while time.time() < start_at:
    time.sleep(0.001)
t0 = time.perf_counter()
for _ in range(reps):
    b = a @ a
print(time.perf_counter() - t0)
"""


@dataclass(frozen=True)
class GuardResult:
    alone_s: float  # median time of the work alone
    pair_s: float  # median over repeats of the slower of two side by side
    ratio: float  # pair_s / alone_s
    limit: float
    repeats: int

    @property
    def ok(self) -> bool:
        return self.ratio <= self.limit

    def to_dict(self) -> dict[str, float | int | bool]:
        return {
            "alone_s": self.alone_s,
            "pair_s": self.pair_s,
            "ratio": self.ratio,
            "limit": self.limit,
            "repeats": self.repeats,
            "ok": self.ok,
        }


def _side_by_side(k: int, n: int, reps: int, timeout_s: float) -> list[float]:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # one core per process: the test is whether k cores are free
    start_at = time.time() + 1.0  # leaves time for interpreter start and numpy import
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORK, str(n), str(reps), str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for _ in range(k)
    ]
    out: list[float] = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout_s)
            if p.returncode != 0:
                raise RuntimeError(f"the neighbour-guard matmul process failed: {stderr[-500:]}")
            out.append(float(stdout.strip()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
    return out


def neighbour_guard(
    n: int = 256, reps: int = 180, repeats: int = 3, limit: float = 1.1, timeout_s: float = 60.0
) -> GuardResult:
    """Time the matmul work alone and two side by side ``repeats`` times each (medians)."""
    alone = [_side_by_side(1, n, reps, timeout_s)[0] for _ in range(repeats)]
    pair = [max(_side_by_side(2, n, reps, timeout_s)) for _ in range(repeats)]
    a, p = statistics.median(alone), statistics.median(pair)
    return GuardResult(a, p, p / a, limit, repeats)


@dataclass(frozen=True)
class CpuSample:
    """Machine-wide busy and steal time (/proc/stat) and this process's and its waited-for
    children's CPU time (getrusage), all in seconds, at one instant."""

    wall_s: float
    busy_s: float  # user + nice + system over every CPU
    steal_s: float  # time the hypervisor ran someone else on our virtual CPUs
    ours_s: float  # user + system of this process and of the children it has waited for


def cpu_sample() -> CpuSample | None:
    """A CpuSample now, or None where /proc/stat is unavailable (not Linux)."""
    import resource

    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, steal = (int(fields[i]) for i in (1, 2, 3, 8))
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return CpuSample(time.monotonic(), (user + nice + system) / tick, steal / tick, ours)


@dataclass(frozen=True)
class OthersResult:
    """CPU the rest of the machine used while a measurement ran, in cores (seconds per second)."""

    others_cores: float  # busy time not ours (other processes, kernel threads), per second
    steal_cores: float  # stolen by the hypervisor, per second
    wall_s: float
    limit: float

    @property
    def ok(self) -> bool:
        return self.others_cores + self.steal_cores <= self.limit

    def to_dict(self) -> dict[str, float | bool]:
        return {
            "others_cores": self.others_cores,
            "steal_cores": self.steal_cores,
            "wall_s": self.wall_s,
            "limit": self.limit,
            "ok": self.ok,
        }


def others_during(before: CpuSample, after: CpuSample, limit: float = 0.1) -> OthersResult:
    """What the rest of the machine used between two samples taken around a measurement whose
    processes were all waited for before ``after``. The kernel's work for our own traffic
    (softirqs) is counted as others' where it runs in kernel threads, so this errs on the side
    of discarding. limit: cores (0.1 = a tenth of one core, the guard's 1.1x)."""
    wall = max(after.wall_s - before.wall_s, 1e-9)
    others = (after.busy_s - before.busy_s) - (after.ours_s - before.ours_s)
    steal = after.steal_s - before.steal_s
    return OthersResult(max(others, 0.0) / wall, max(steal, 0.0) / wall, wall, limit)
