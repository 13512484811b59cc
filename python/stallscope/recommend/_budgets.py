"""Budgets as people write them: a time ("24h", "90m", "2d", "3600s", or hours as a number)
and an amount of money ("5000", "$5,000")."""

from __future__ import annotations

import math
import re
from typing import Final

from stallscope.recommend._errors import RecommendError

_HOURS_PER: Final = {"s": 1 / 3600, "m": 1 / 60, "min": 1 / 60, "h": 1.0, "d": 24.0, "w": 168.0}
_TIME: Final = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(s|m|min|h|d|w)?\s*$", re.I)


def hours(value: str | float, what: str = "time budget", *, zero: bool = False) -> float:
    """A duration in hours: a number of hours, or a string with a unit (s, m/min, h, d, w).
    ``what`` names it in errors; ``zero``: 0 is allowed."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        got = float(value)
    else:
        m = _TIME.match(str(value))
        if m is None:
            raise RecommendError(
                f"{what} {value!r} is not a duration; write it like 24h, 90m, 2d or 3600s"
            )
        got = float(m.group(1)) * _HOURS_PER[(m.group(2) or "h").lower()]
    if not (math.isfinite(got) and (got > 0 or (zero and got == 0))):
        least = "0 hours or more" if zero else "more than 0 hours"
        raise RecommendError(f"a {what} must be {least}, got {value!r}")
    return got


def dollars(value: str | float) -> float:
    """A cost budget in dollars: a number, optionally written with "$" and "," separators."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        got = float(value)
    else:
        text = str(value).strip().removeprefix("$").replace(",", "").strip()
        try:
            got = float(text)
        except ValueError:
            raise RecommendError(
                f"cost budget {value!r} is not an amount of dollars; write it like 5000 or $5,000"
            ) from None
    if not (math.isfinite(got) and got > 0):
        raise RecommendError(f"a cost budget must be more than $0, got {value!r}")
    return got
