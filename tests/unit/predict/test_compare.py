"""compare(): a prediction beside a measured stall table, column by column."""

from __future__ import annotations

import polars as pl
import pytest

import stallscope
from stallscope.analysis import STALL_COLUMNS
from stallscope.predict import PredictError, Target, compare, measured_step, predict, profile_of

from .runs import MS, CpuRun


def test_measured_step_is_the_median_step_of_the_rank_mean() -> None:
    table = stallscope.stall_table(CpuRun().frame())
    m = measured_step(table)
    assert m["step_ns"] == 42 * MS
    assert m["compute_ns"] == 34 * MS and m["interconnect_ns"] == 5 * MS
    assert sum(m[c] for c in STALL_COLUMNS) == m["step_ns"]


def test_compare_columns_and_errors() -> None:
    events = CpuRun().frame()
    pred = {"step_ns": 46.2 * MS, **dict.fromkeys(STALL_COLUMNS, 0.0)}
    pred["compute_ns"] = 34 * MS
    pred["interconnect_ns"] = 9.2 * MS
    pred["data_ns"] = 2 * MS
    pred["host_ns"] = 1 * MS
    out = compare(pred, events)
    assert out["column"].to_list() == ["step_ns", *STALL_COLUMNS]
    by = {r["column"]: r for r in out.iter_rows(named=True)}
    assert by["step_ns"]["error_pct"] == pytest.approx(10.0)
    assert by["interconnect_ns"]["error_ns"] == pytest.approx(4.2 * MS)
    assert by["interconnect_ns"]["error_of_step_pct"] == pytest.approx(10.0)
    assert by["compute_ns"]["error_pct"] == pytest.approx(0.0)
    assert by["network_ns"]["error_pct"] is None  # measured 0: no relative error


def test_a_prediction_of_the_measured_configuration_matches_it() -> None:
    events = CpuRun(wait=5 * MS).frame()
    prof = profile_of(events)
    # one node, 2 ranks: the intra-node tier from a link that moves the 5 MB in the 5 ms wait
    cal_doc = {
        "format": "stallscope.comm.calibration",
        "version": 1,
        "backend": "gloo",
        "fits": [
            {
                "collective": "all_reduce",
                "tier": "intra_node",
                "place": "in",
                "group_size": 2,
                "alpha_s": 0.0,
                "beta_s_per_byte": 5e-3 / (5 << 20),
                "min_bytes": 1 << 20,
                "max_bytes": 4 << 20,
            }
        ],
    }
    from stallscope.comm import Calibration

    pred = predict(prof, Target(1, 2), calibration=Calibration(cal_doc))
    out = compare(pred, events)
    assert out.filter(pl.col("column") == "step_ns")["error_pct"].item() == pytest.approx(
        0, abs=0.01
    )
    assert out["error_of_step_pct"].abs().max() < 0.01


def test_bad_measured_input() -> None:
    pred = {"step_ns": 1.0, **dict.fromkeys(STALL_COLUMNS, 0.0)}
    with pytest.raises(PredictError, match="stall table"):
        compare(pred, pl.DataFrame({"x": [1]}))
    with pytest.raises(PredictError, match="one predicted configuration"):
        compare(pl.DataFrame([pred, pred]), CpuRun().frame())
    with pytest.raises(PredictError, match="lacks column"):
        compare({"step_ns": 1.0}, CpuRun().frame())
