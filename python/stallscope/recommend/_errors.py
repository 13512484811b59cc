"""The recommender's errors: bad input (work, budget, job facts, options) and a budget that no
configuration meets."""

from __future__ import annotations

from typing import Any

from stallscope.exceptions import StallscopeError


class RecommendError(StallscopeError):
    """Input the recommender cannot use: an amount of work without the facts to convert it, a
    budget that is not a positive number, a GPU no device table entry has, a measured run on CPU
    threads without the device its compute stands for. The message says what to give instead."""


class NoCandidateError(RecommendError):
    """No configuration meets the budget. ``closest`` is the candidate nearest to it (the fastest
    for a time budget, the cheapest for a cost budget, as a dict of its row), ``needed`` the
    budget that candidate would need (hours or dollars), ``candidates`` every candidate's row."""

    def __init__(
        self,
        message: str,
        closest: dict[str, Any] | None,
        needed: float | None,
        candidates: Any = None,
    ) -> None:
        super().__init__(message)
        self.closest = closest
        self.needed = needed
        self.candidates = candidates
