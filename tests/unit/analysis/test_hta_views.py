"""The HTA-identical views reproduce HolisticTraceAnalysis 0.5.0's numbers on the real traces.

Ground truth: tests/data/hta_reference/*.json, written by bench/hta_reference.py running HTA 0.5.0
(in its own venv) on the trace sets of tests/data/kineto/. Times in the fixtures are HTA's µs;
ours are ns."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import stallscope
from stallscope.analysis import (
    comm_comp_overlap,
    idle_time_breakdown,
    kernel_breakdown,
    kernel_type_breakdown,
    launch_stats_summary,
    queue_length_summary,
    temporal_breakdown,
)

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "tests" / "data" / "hta_reference"
TRACES = sorted(p.stem for p in REFERENCE.glob("*.json"))
DATA = ROOT / "tests" / "data" / "kineto"  # the trace sets, one folder each


_EVENTS: dict[str, pl.DataFrame] = {}


def _case(name: str) -> tuple[pl.DataFrame, dict[str, Any]]:
    if name not in _EVENTS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _EVENTS[name] = stallscope.import_kineto(DATA / name)
    return _EVENTS[name], json.loads((REFERENCE / f"{name}.json").read_text())


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)


def test_reference_fixtures_cover_every_trace_set() -> None:
    sets = sorted(p.name for p in DATA.iterdir() if p.is_dir())
    assert len(sets) == 6
    assert sets == TRACES


@pytest.mark.parametrize("name", TRACES)
def test_temporal_breakdown_matches_hta(name: str) -> None:
    events, ref = _case(name)
    got = {r["rank"]: r for r in temporal_breakdown(events).iter_rows(named=True)}
    assert sorted(got) == sorted(r["rank"] for r in ref["temporal_breakdown"])
    for r in ref["temporal_breakdown"]:
        g = got[r["rank"]]
        assert g["kernel_time_ns"] == r["kernel_time(us)"] * 1000
        assert g["idle_time_ns"] == r["idle_time(us)"] * 1000
        assert g["compute_time_ns"] == r["compute_time(us)"] * 1000
        assert g["non_compute_time_ns"] == r["non_compute_time(us)"] * 1000
        assert (g["idle_pct"], g["compute_pct"], g["non_compute_pct"]) == (
            r["idle_time_pctg"],
            r["compute_time_pctg"],
            r["non_compute_time_pctg"],
        )


@pytest.mark.parametrize("name", TRACES)
def test_comm_comp_overlap_matches_hta(name: str) -> None:
    events, ref = _case(name)
    got = {r["rank"]: r["overlap_pct"] for r in comm_comp_overlap(events).iter_rows(named=True)}
    for r in ref["comm_comp_overlap"]:
        assert _same(got[r["rank"]], r["comp_comm_overlap_pctg"]), r


@pytest.mark.parametrize("name", TRACES)
def test_kernel_breakdowns_match_hta(name: str) -> None:
    events, ref = _case(name)
    types = {
        r["kernel_type"]: (r["time_ns"], r["percentage"])
        for r in kernel_type_breakdown(events).iter_rows(named=True)
    }
    assert types == {
        r["kernel_type"]: (r["sum"] * 1000, r["percentage"]) for r in ref["kernel_type_breakdown"]
    }
    got = {
        (r["kernel_type"], r["name"], r["rank"]): r
        for r in kernel_breakdown(events).iter_rows(named=True)
    }
    want = {(r["kernel_type"], r["name"], r["rank"]): r for r in ref["kernel_breakdown"]}
    assert set(got) == set(want)
    for key, w in want.items():
        g = got[key]
        for ours, theirs in (
            ("sum_ns", "sum (us)"),
            ("max_ns", "max (us)"),
            ("min_ns", "min (us)"),
            ("mean_ns", "mean (us)"),
            ("std_ns", "stddev"),
        ):
            assert math.isclose(g[ours], w[theirs] * 1000, rel_tol=1e-9, abs_tol=1e-6), (key, ours)


@pytest.mark.parametrize("name", TRACES)
def test_launch_stats_match_hta(name: str) -> None:
    events, ref = _case(name)
    got = {r["rank"]: r for r in launch_stats_summary(events).iter_rows(named=True)}
    for rank, w in ref["launch_stats"].items():
        g = got[int(rank)]
        assert g["launches"] == w["count"]
        assert g["cpu_duration_ns"] == w["cpu_duration_sum"] * 1000
        assert g["gpu_duration_ns"] == w["gpu_duration_sum"] * 1000
        assert g["launch_delay_ns"] == w["launch_delay_sum"] * 1000
        assert g["max_launch_delay_ns"] == w["launch_delay_max"] * 1000
        assert g["gpu_shorter_than_cpu"] == w["gpu_shorter_than_cpu"]
        assert g["long_runtime"] == w["cpu_over_50us"]
        assert g["long_launch_delay"] == w["launch_delay_over_100us"]


@pytest.mark.parametrize("name", TRACES)
def test_idle_time_breakdown_matches_hta(name: str) -> None:
    events, ref = _case(name)
    got = {
        (r["rank"], r["stream"], r["idle_category"]): r
        for r in idle_time_breakdown(events).iter_rows(named=True)
    }
    want = {(r["rank"], r["stream"], r["idle_category"]): r for r in ref["idle_time_breakdown"]}
    assert set(got) == set(want)
    for key, w in want.items():
        g = got[key]
        assert g["idle_time_ns"] == w["idle_time"] * 1000, key
        assert _same(g["idle_time_ratio"], w["idle_time_ratio"]), key


@pytest.mark.parametrize("name", TRACES)
def test_queue_length_matches_hta(name: str) -> None:
    """Counts, extremes and quartiles exactly; mean and std within 5 %: HTA orders a launch and
    an op start at the same µs by an unstable quicksort, which moves single steps of the series."""
    events, ref = _case(name)
    got = {(r["rank"], r["stream"]): r for r in queue_length_summary(events).iter_rows(named=True)}
    want = {(r["rank"], r["stream"]): r for r in ref["queue_length"]}
    assert set(got) == set(want)
    for key, w in want.items():
        g = got[key]
        assert (g["count"], g["min"], g["max"]) == (w["count"], w["min"], w["max"]), key
        assert (g["p25"], g["p50"], g["p75"]) == (w["25%"], w["50%"], w["75%"]), key
        assert math.isclose(g["mean"], w["mean"], rel_tol=0.05, abs_tol=0.02), key
        if w["std"] is not None:
            assert math.isclose(g["std"], w["std"], rel_tol=0.05, abs_tol=0.02), key


@pytest.mark.parametrize("name", TRACES)
def test_gpu_only_rows_are_the_whole_rows_with_a_stream(name: str) -> None:
    """The kernel views read HTA's rows with a stream only (hta_arrays(gpu_only=True)): made on
    their own, they equal the whole rows' GPU part, array for array, in the same order."""
    from stallscope.analysis.hta._loading import _hta_rows

    events, _ = _case(name)
    for last_step in (False, True):
        alone = _hta_rows(events, last_step, True)
        part = _hta_rows(events, last_step, False).gpu_rows()
        assert alone.gpu_only and part.gpu_only
        assert alone.row.size == part.row.size > 0
        for field in ("row", "rank", "kind", "name", "stream", "correlation", "is_gpu"):
            assert (getattr(alone, field) == getattr(part, field)).all(), field
        for field in ("ts", "end", "runtime", "kernel_type"):
            a, b = getattr(alone, field), getattr(part, field)
            assert ((a == b) | (a != a) & (b != b)).all(), field  # NaN where both are NaN
        with pytest.raises(ValueError, match="GPU rows only"):
            alone.frame()
