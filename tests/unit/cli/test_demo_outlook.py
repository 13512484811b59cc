"""The demo's look-ahead steps: present only when this stallscope has the predictor and the
recommender, fed by their frames, and never fatal."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import stallscope.predict
import stallscope.recommend
from stallscope.analysis import STALL_COLUMNS
from stallscope.cli import _demo_outlook as outlook


def _sweep(profile: Any, **kw: Any) -> pl.DataFrame:
    rows = []
    for n in kw["nodes"]:
        stalls = dict.fromkeys(STALL_COLUMNS, 0) | {"compute_ns": 60_000_000}
        stalls["network_ns"] = 10_000_000 * n
        rows.append(
            {"nodes": n, "ranks_per_node": kw["ranks_per_node"][0], "rate_bps": kw["rates_bps"][0]}
            | {"step_ns": 60_000_000 + 10_000_000 * n, "speedup": n / 2}
            | stalls
        )
    return pl.DataFrame(rows)


def test_prediction_for_4_and_8_nodes_when_the_predictor_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Path] = []
    monkeypatch.setattr(stallscope.predict, "profile_of", seen.append, raising=False)
    monkeypatch.setattr(stallscope.predict, "sweep", _sweep, raising=False)
    assert outlook.predictor() is stallscope.predict
    got = outlook.predict(tmp_path, 1, 5e8)
    assert seen == [tmp_path] and got.error is None
    assert got.frame is not None and got.frame["nodes"].to_list() == [4, 8]
    assert got.lines[0] == (
        "4 nodes x 1 rank(s): step 100.0 ms, communication 40%, throughput x2.00 of the "
        "measured run"
    )


def test_a_failing_predictor_is_reported_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(run: Path) -> None:
        raise ValueError("no steps to profile")

    monkeypatch.setattr(stallscope.predict, "profile_of", broken, raising=False)
    monkeypatch.setattr(stallscope.predict, "sweep", _sweep, raising=False)
    got = outlook.predict(tmp_path, 1, None)
    assert got.error == "ValueError: no steps to profile" and got.frame is None


def test_without_the_tools_the_steps_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(stallscope.predict, "profile_of", raising=False)
    monkeypatch.delattr(stallscope.recommend, "recommendation", raising=False)
    monkeypatch.delattr(stallscope.recommend, "recommend", raising=False)
    assert outlook.predictor() is None
    assert outlook.recommender() is None
    assert outlook.predict(Path("x"), 1, None).error is not None


def test_recommendation_gives_its_pareto_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    front = pl.DataFrame({"config": ["2x p4d.24xlarge"], "hours": [20.0], "cost": [900.0]})

    class Rec:
        def __init__(self) -> None:
            self.best = {"config": "2x p4d.24xlarge"}
            self.why = "the cheapest that finishes in 24 h"
            self.pareto = front

    def recommendation(run: Path, **kw: Any) -> Rec:
        assert kw["steps"] == outlook.JOB_STEPS and kw["time_budget"] == outlook.TIME_BUDGET
        warnings.warn("prices are old", stacklevel=1)
        return Rec()

    monkeypatch.setattr(stallscope.recommend, "recommendation", recommendation, raising=False)
    got = outlook.recommend(tmp_path)
    assert got.error is None and got.frame is front
    assert got.notes == ["prices are old"]
    assert got.lines == [
        "100,000 steps within 24h (the demo's CPU compute standing for a T4's): 2x p4d.24xlarge",
        "the cheapest that finishes in 24 h",
    ]
