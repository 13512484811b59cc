"""A real 2-rank gloo `stallscope bench comm` on loopback: every collective and place runs, gives
correct results, and reports time / algbw / busbw consistently; the calibration file is written."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from stallscope._cli.main import cli
from stallscope.comm import _formulas as f

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
]


def test_bench_comm_two_ranks_gloo(tmp_path: Path) -> None:
    out, cal = tmp_path / "r.json", tmp_path / "cal.json"
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            "comm",
            "--nprocs",
            "2",
            "-c",
            "all",
            "-b",
            "4K",
            "-e",
            "64K",
            "-f",
            "4",
            "-w",
            "1",
            "-n",
            "2",
            "--check",
            "--json",
            str(out),
            "--calibrate",
            str(cal),
            "--min-fit-bytes",
            "4K",
            "--timeout",
            "120",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "busbw_GBps" in res.output
    assert "alpha-beta fits" in res.output
    rep = orjson.loads(out.read_bytes())
    assert rep["format"] == "stallscope.comm.bench"
    assert rep["backend"] == "gloo"
    assert rep["world_size"] == 2
    rows = rep["results"]
    got = {(r["collective"], r["place"]) for r in rows}
    assert got == {
        ("all_reduce", "in"),
        ("all_gather", "in"),
        ("all_gather", "out"),
        ("reduce_scatter", "in"),
        ("reduce_scatter", "out"),
        ("broadcast", "in"),
        ("all_to_all", "out"),
        ("send_recv", "out"),
    }
    assert {r["bytes"] for r in rows} == {4096, 16384, 65536}
    for r in rows:
        assert r["check_error"] == 0.0, r  # the collective computed the right values
        assert r["group_size"] == 2
        assert r["tier"] == "intra_node"
        assert r["time_min_ns"] <= r["time_ns"] <= r["time_max_ns"]
        assert len(r["rank_times_ns"]) == 2
        assert r["algbw_Bps"] == pytest.approx(r["bytes"] / (r["time_ns"] * 1e-9))
        assert r["busbw_Bps"] == pytest.approx(r["algbw_Bps"] * f.bus_factor(r["collective"], 2))
    doc = orjson.loads(cal.read_bytes())
    assert {x["collective"] for x in doc["fits"]} == set(f.COLLECTIVES)
    assert all(x["max_rel_error"] >= 0 and x["r2"] <= 1 for x in doc["fits"])


def test_bench_comm_rejects_bad_options() -> None:
    res = CliRunner().invoke(cli, ["bench", "comm", "-c", "allreduce", "--nprocs", "2"])
    assert res.exit_code != 0
    assert "unknown collective" in res.output
    res = CliRunner().invoke(cli, ["bench", "comm", "-b", "lots"])
    assert res.exit_code != 0
    assert "not a number of bytes" in res.output
