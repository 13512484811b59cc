"""A real 2-rank gloo `stallscope bench comm` on loopback: every collective and place runs, gives
correct results, and reports time / algbw / busbw consistently; the calibration file is written."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
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
        if Path("/proc/self/task").is_dir():  # Linux: the run-queue wait per op is measured
            assert r["runq_wait_ns"] is not None and r["runq_wait_ns"] >= 0
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


def test_bench_comm_in_a_job_measures_both_tiers(tmp_path: Path) -> None:
    """Under a launcher's environment (here: 4 ranks, 2 per "node" by NODE_RANK, on loopback) the
    command joins the job, measures the intra-node and inter-node groups and calibrates both."""
    import os
    import subprocess
    import sys

    from stallscope.comm._launch import free_port

    cal = tmp_path / "cal.json"
    port = str(free_port())
    procs = []
    for rank in range(4):
        env = dict(os.environ)
        env.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            RANK=str(rank),
            WORLD_SIZE="4",
            LOCAL_RANK=str(rank % 2),
            LOCAL_WORLD_SIZE="2",
            GROUP_RANK=str(rank // 2),
            NODE_RANK=str(rank // 2),
        )
        argv = [sys.executable, "-m", "stallscope.cli.main", "bench", "comm", "-b", "64K"]
        argv += ["-e", "128K", "-w", "1", "-n", "2", "--check", "--calibrate", str(cal)]
        argv += ["--timeout", "90", "--min-seconds-per-size", "0", "--min-bytes-per-size", "0"]
        procs.append(
            subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        )
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=150)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outs[0][-3000:]
    assert "4 rank(s) on 2 node(s)" in outs[0]
    assert "alpha-beta fits" not in outs[1]  # only rank 0 reports
    doc = orjson.loads(cal.read_bytes())
    tiers = {(x["tier"], x["group_size"]) for x in doc["fits"]}
    assert tiers == {("intra_node", 2), ("inter_node", 2)}
    assert doc["nnodes"] == 2
    assert doc["world_size"] == 4
