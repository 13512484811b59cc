"""Predicting the measured configuration gives back the measured step and stall columns.

The profile's figures are means over the same rank-steps as the measured summary (the middle
half of the steps), so compute, data and host compose back exactly; the link of a CPU run on one
node is fitted to its exposed transfer; what is left is the model's own error, which grows with
the run's noise. Tolerance: 3 % of the step on a quiet run, plus half the run's noise on a noisy
one (the interquartile range of its step times plus the skew of its ranks' step windows: the
spread the prediction carries).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import stallscope.predict as sp
from stallscope.analysis import STALL_COLUMNS
from stallscope.predict._central import NOISY_SPREAD

from .runs import MS, CpuRun

QUIET_TOLERANCE = 0.03  # of the measured step


def identity(p: sp.Profile) -> dict[str, float]:
    m = p.measured
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.PredictWarning)
        row: dict[str, float] = sp.predict(p, sp.Target(m.nodes, m.ranks_per_node)).row(
            0, named=True
        )
    return row


def tolerance(p: sp.Profile) -> float:
    m = p.measured
    return QUIET_TOLERANCE * m.step_ns + 0.5 * p.noise * (m.step_median_ns or m.step_ns)


def assert_identity(p: sp.Profile, tol: float) -> None:
    m, row = p.measured, identity(p)
    assert sum(m.stalls_ns[c] for c in STALL_COLUMNS) == pytest.approx(m.step_ns, rel=1e-9)
    assert abs(row["step_ns"] - m.step_ns) <= tol, (row["step_ns"], m.step_ns, tol)
    for c in STALL_COLUMNS:
        assert abs(row[c] - m.stalls_ns[c]) <= tol, (c, row[c], m.stalls_ns[c], tol)


@pytest.mark.parametrize(
    "run",
    [CpuRun(), CpuRun(slow={1: 1.5}), CpuRun(ranks=4, slow={2: 1.3}), CpuRun(ranks=1, wait=0)],
    ids=["even", "straggler", "4-ranks", "1-rank"],
)
def test_a_quiet_made_up_run_comes_back_exactly(run: CpuRun) -> None:
    p = sp.profile_of(run.frame())
    assert p.noise == 0.0
    assert_identity(p, 0.001 * p.measured.step_ns)


def test_a_noisy_run_says_so_and_its_prediction_carries_the_spread() -> None:
    run = CpuRun(steps=12, jitter=[0, 8 * MS, 2 * MS, 30 * MS, 4 * MS, 1 * MS])
    p = sp.profile_of(run.frame())
    m = p.measured
    assert m.step_spread_ns > 0 and p.noise > NOISY_SPREAD
    assert m.step_ns != m.step_median_ns  # the mean of the middle half, not the median
    assert any("noisy" in n for n in p.notes)
    row = identity(p)
    assert row["step_spread_ns"] == pytest.approx(row["step_ns"] * p.noise)
    assert_identity(p, 0.001 * m.step_ns)  # the noise is in the data wait: composed exactly


@pytest.mark.torch
def test_the_demo_on_one_rank_predicts_back_its_table(demo_run_1: Path) -> None:
    assert_identity(sp.profile_of(demo_run_1), tolerance(sp.profile_of(demo_run_1)))


@pytest.mark.torch
def test_the_demo_on_two_ranks_predicts_back_its_table(demo_run: Path) -> None:
    p = sp.profile_of(demo_run)
    assert_identity(p, tolerance(p))
    # its link within the node is its own, fitted to the transfer it exposed
    pred = sp.prediction(p, sp.Target(1, 2))
    assert any("fitted" in line for line in pred.links)
    assert pred.frame["step_spread_ns"][0] == pytest.approx(
        pred.frame["step_ns"][0] * p.noise, rel=1e-9
    )
