"""The planner's error and the helpers that word its messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from stallscope.exceptions import StallscopeError


class PlanError(StallscopeError):
    """A model, system or parallel configuration the planner cannot use: the message names the
    input at fault and the nearest valid choices."""


def nearest_names(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``name`` (case-insensitive), best first."""
    pool = list(choices)
    lower = {c.lower(): c for c in pool}
    hits = difflib.get_close_matches(name.lower(), list(lower), n=n, cutoff=0.3)
    return [lower[h] for h in hits] or pool[:n]


def divisors(n: int) -> list[int]:
    """Every positive divisor of ``n``, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def nearest_values(target: int, valid: Iterable[int], n: int = 3) -> list[int]:
    """Up to ``n`` of ``valid`` closest to ``target``, ascending."""
    best = sorted(valid, key=lambda v: (abs(v - target), v))[:n]
    return sorted(best)


def listed(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)
