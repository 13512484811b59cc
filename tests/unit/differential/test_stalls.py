"""The published definitions, and the trace's figure for each stall, on known run summaries."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from stallscope.analysis import STALL_COLUMNS
from stallscope.differential import STALLS_SCHEMA, differential_stalls
from stallscope.exceptions import AnalyzeError

MS = 1e6


def summary(run: str, step: float, samples: float | None = 10.0, **cats: float) -> dict[str, Any]:
    row: dict[str, Any] = {c: 0.0 for c in STALL_COLUMNS}
    row.update({f"{k}_ns": v * MS for k, v in cats.items()})
    row.update(run=run, step_ns=step * MS, samples_per_step=samples)
    return row


def runs(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows))


def by_stall(df: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {
        (r["stall"] if r["rate"] is None else f"{r['stall']}@{r['rate']}"): r
        for r in df.iter_rows(named=True)
    }


def test_every_definition_with_its_base_and_trace_counterpart() -> None:
    df = differential_stalls(
        runs(
            summary("one", 100, compute=100),
            summary("synthetic", 120, compute=100, interconnect=15, sync_wait=5),
            summary("cached", 150, compute=100, interconnect=15, sync_wait=5, data_prep=25),
            summary(
                "cold",
                200,
                compute=100,
                interconnect=15,
                sync_wait=5,
                data_prep=30,
                data_fetch=40,
                data=10,
            ),
            summary("network@1gbit", 180, compute=100, network=70, sync_wait=10),
            summary("network@200mbit", 400, compute=100, network=290, sync_wait=10),
        )
    )
    assert df.schema == pl.Schema(STALLS_SCHEMA)
    s = by_stall(df)
    assert list(s) == ["prep", "fetch", "data", "interconnect", "network@1gbit", "network@200mbit"]
    prep = s["prep"]
    assert (prep["minuend"], prep["subtrahend"]) == ("cached", "synthetic")
    assert prep["ns_per_step"] == 30 * MS and prep["ns_per_sample"] == 3 * MS
    assert prep["share_pct"] == pytest.approx(20.0)  # of T(cached) = 150
    assert prep["trace_ns_per_step"] == 25 * MS  # the cached run's data wait
    assert prep["disagreement_pct_points"] == pytest.approx(25 / 150 * 100 - 20)
    fetch = s["fetch"]
    assert fetch["ns_per_step"] == 50 * MS and fetch["share_pct"] == pytest.approx(25.0)
    assert fetch["trace_ns_per_step"] == 55 * MS  # (30 + 40 + 10) - 25
    assert fetch["trace_comm_ns_per_step"] == 0.0
    data = s["data"]
    assert data["ns_per_step"] == 80 * MS and data["trace_ns_per_step"] == 80 * MS
    assert data["disagreement_ns_per_sample"] == 0.0
    ic = s["interconnect"]
    assert ic["ns_per_step"] == 20 * MS and ic["share_pct"] == pytest.approx(100 * 20 / 120)
    assert ic["trace_ns_per_step"] == 20 * MS  # sync wait + interconnect, minus none
    assert ic["trace_comm_ns_per_step"] is None
    net = s["network@1gbit"]
    assert (net["minuend"], net["subtrahend"], net["rate"]) == (
        "network@1gbit",
        "synthetic",
        "1gbit",
    )
    assert net["ns_per_step"] == 60 * MS and net["share_pct"] == pytest.approx(50.0)  # of 120
    assert net["trace_ns_per_step"] == 60 * MS  # 80 of comm minus the one-node run's 20
    assert s["network@200mbit"]["ns_per_step"] == 280 * MS


def test_missing_runs_leave_their_stalls_out_and_unknown_sizes_give_nulls() -> None:
    df = differential_stalls(
        runs(summary("synthetic", 100, None), summary("cached", 130, None, data=20))
    )
    (prep,) = df.to_dicts()
    assert prep["stall"] == "prep" and prep["ns_per_step"] == 30 * MS
    assert prep["ns_per_sample"] is None and prep["disagreement_ns_per_sample"] is None
    assert prep["share_pct"] == pytest.approx(100 * 30 / 130)
    empty = differential_stalls(runs(summary("synthetic", 100)))
    assert empty.height == 0 and empty.schema == pl.Schema(STALLS_SCHEMA)
    with pytest.raises(AnalyzeError, match="needs a run column"):
        differential_stalls(pl.DataFrame({"x": [1]}))
