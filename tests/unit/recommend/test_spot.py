"""The spot model against a Monte-Carlo simulation of interruptions: a job runs its work
between checkpoints, each instance-hour draws interruptions from an exponential clock, an
interruption throws away the work since the last checkpoint and costs the restart."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stallscope.recommend import RecommendError, SpotModel
from stallscope.recommend._spot import (
    expected_hours,
    expected_interruptions,
    hours_quantile,
    miss_probability,
)


def _simulate(work: float, rate: float, model: SpotModel, runs: int, seed: int) -> np.ndarray:
    """Hours each of ``runs`` jobs took, and their interruptions, event by event."""
    rng = np.random.default_rng(seed)
    took = np.empty(runs)
    fails = np.empty(runs)
    for i in range(runs):
        clock = done = 0.0
        k = 0
        while done < work - 1e-12:
            segment = min(model.interval_hours, work - done)
            until = rng.exponential(1 / rate)  # time to the next interruption, while running
            if until >= segment:
                clock += segment
                done += segment
            else:
                clock += until + model.restart_hours
                k += 1
        took[i] = clock
        fails[i] = k
    return np.stack([took, fails])


CASES = [
    # work hours, interruptions per hour, checkpoint interval, restart
    (10.0, 0.05, 1.0, 0.25),
    (30.5, 0.2, 2.0, 0.5),
    (5.0, 0.01, 1.0, 0.0),
    (3.0, 1.5, 0.25, 0.05),
]


@pytest.mark.parametrize(("work", "rate", "interval", "restart"), CASES)
def test_expectations_and_risk_agree_with_simulation(
    work: float, rate: float, interval: float, restart: float
) -> None:
    model = SpotModel(interval, restart)
    runs = 20_000
    took, fails = _simulate(work, rate, model, runs, seed=7)
    se = took.std() / math.sqrt(runs)
    assert abs(expected_hours(work, rate, model) - took.mean()) < 4 * se + 1e-9
    se_k = fails.std() / math.sqrt(runs)
    assert abs(expected_interruptions(work, rate, model) - fails.mean()) < 4 * se_k + 1e-9
    for budget in (work * 1.02, work * 1.1, float(np.quantile(took, 0.5)), work * 1.5):
        p = float((took > budget).mean())
        se_p = math.sqrt(max(p * (1 - p), 1 / runs) / runs)
        # the model's grid rounds each interruption to 1/128 of (interval + restart)
        grid = (interval + restart) / 128
        lo = float((took > budget + 3 * grid).mean())
        hi = float((took > budget - 3 * grid).mean())
        got = miss_probability(work, rate, model, budget)
        assert lo - 4 * se_p <= got <= hi + 4 * se_p, (budget, got, p)
    q = hours_quantile(work, rate, model, 0.9)
    assert abs(q - float(np.quantile(took, 0.9))) < 0.05 * work


def test_without_interruptions_the_work_is_the_time() -> None:
    model = SpotModel()
    assert expected_hours(12.0, 0.0, model) == 12.0
    assert miss_probability(12.0, 0.0, model, 12.0) == 0.0
    assert miss_probability(12.0, 0.3, model, 11.9) == 1.0  # the work alone is too long


def test_rare_interruptions_with_a_long_restart_are_a_tail_risk() -> None:
    # One interruption in ~20 jobs, each costing 10 h: the expected time is over the budget,
    # yet 19 jobs in 20 finish within it.
    model = SpotModel(interval_hours=1.0, restart_hours=10.0)
    work, rate = 10.0, 0.005
    budget = 10.4
    assert expected_hours(work, rate, model) > budget
    assert miss_probability(work, rate, model, budget) == pytest.approx(
        -math.expm1(-rate * work), rel=1e-6
    )


def test_many_interruptions_use_the_normal_law_and_stay_close() -> None:
    model = SpotModel(interval_hours=0.1, restart_hours=0.01)
    work, rate = 400.0, 4.0  # about 2,000 interruptions expected
    assert expected_interruptions(work, rate, model) > 1000
    mean = expected_hours(work, rate, model)
    assert miss_probability(work, rate, model, mean) == pytest.approx(0.5, abs=0.02)
    assert miss_probability(work, rate, model, mean * 1.2) < 1e-3


@pytest.mark.parametrize(
    ("interval", "restart", "message"),
    [
        (0.0, 0.1, "checkpoint interval must be > 0 hours"),
        (-1.0, 0.1, "checkpoint interval must be > 0 hours"),
        (1.0, -0.5, "restart time must be >= 0 hours"),
        (math.nan, 0.1, "checkpoint interval must be > 0 hours"),
    ],
)
def test_bad_model_parameters(interval: float, restart: float, message: str) -> None:
    with pytest.raises(RecommendError, match=message):
        SpotModel(interval, restart)
