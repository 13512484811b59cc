"""Noisy-neighbour guard (docs/architecture.md section 10): time a small matmul process alone,
then two side by side. On an otherwise idle 2-core machine both run at full speed; if the pair is
more than 1.1x slower, another tenant is using the cores and timings taken now are not
trustworthy."""

from __future__ import annotations

import subprocess
import sys
import time

_PROBE = (
    "import time, numpy as np\n"
    "a = np.random.rand(256, 256)\n"
    "t = time.perf_counter()\n"
    "for _ in range(300): a @ a\n"
    "print(time.perf_counter() - t)\n"
)


def _run(n: int) -> float:
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", _PROBE], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(n)
    ]
    return max(float(p.communicate(timeout=120)[0]) for p in procs)


def neighbour_slowdown() -> float:
    """Slowdown of two probe processes side by side over one alone (1.0 = quiet machine)."""
    alone = min(_run(1) for _ in range(2))
    pair = min(_run(2) for _ in range(2))
    return pair / alone


def check(label: str, limit: float = 1.1) -> dict[str, object]:
    s = neighbour_slowdown()
    ok = s <= limit
    print(
        f"noise guard ({label}): pair/alone = {s:.2f} -> {'quiet' if ok else 'NOISY: discard this run'}",
        file=sys.stderr,
    )
    return {
        "when": label,
        "pair_over_alone": round(s, 3),
        "quiet": ok,
        "at": time.strftime("%H:%M:%S"),
    }
