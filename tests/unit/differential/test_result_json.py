"""The JSON document of a result: runs, stalls per definition and per rate, the trace's figures,
disagreements."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from stallscope.analysis import STALL_COLUMNS
from stallscope.differential import Entry, Result, Settings, differential_stalls, result_json

MS = 1e6


def _run(
    name: str, step: float, nodes: int = 1, rate: str | None = None, **c: float
) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(STALL_COLUMNS, 0.0)
    row.update({f"{k}_ns": v * MS for k, v in c.items()})
    row.update(run=name, ranks=2, nodes=nodes, data="synthetic", cache=None, rate=rate, steps=10,
               step_ns=step * MS, step_cv=0.01, samples_per_step=4.0, wall_s=1.0,
               run_dir=f"/runs/{name}")  # fmt: skip
    return row


def test_network_per_rate_and_the_first_rate_as_network() -> None:
    runs = pl.DataFrame(
        [
            _run("synthetic", 100, compute=90, interconnect=10),
            _run("network@1gbit", 130, 2, "1gbit", compute=90, network=40),
            _run("network@200mbit", 250, 2, "200mbit", compute=90, network=160),
        ]
    )
    res = Result(Settings(rates=("1gbit", "200mbit"), skip=("data",)), Entry(("python", "t.py")),
                 runs, differential_stalls(runs), [], guard={"others_cores": 0.02})  # fmt: skip
    doc = result_json(res)
    assert doc["command"] == ["python", "t.py"]
    assert doc["settings"]["rates"] == ["1gbit", "200mbit"] and doc["settings"]["skip"] == ["data"]
    assert set(doc["stalls"]) == {"network", "network@1gbit", "network@200mbit"}
    assert doc["stalls"]["network"] == doc["stalls"]["network@1gbit"]
    n = doc["stalls"]["network@200mbit"]
    assert n["ns_per_step"] == 150 * MS and n["ns_per_sample"] == pytest.approx(37.5 * MS)
    assert n["share_pct"] == pytest.approx(150.0) and n["runs"] == ["network@200mbit", "synthetic"]
    assert doc["trace"]["network@200mbit"]["ns_per_step"] == 150 * MS
    assert "comm_ns_per_step" not in doc["trace"]["network"]
    assert doc["disagreement"]["network@1gbit"] == {"ns_per_sample": 0.0, "pct_points": 0.0}
    r = doc["runs"][1]
    assert r["trace"]["network_ns"] == 40 * MS and r["page_cache"] is None
    assert r["run_dir"] == "/runs/network@1gbit" and doc["noise_guard"] == {"others_cores": 0.02}
