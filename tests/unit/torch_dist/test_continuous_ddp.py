"""A real 2-rank gloo DDP job traced in continuous mode: bounded events, the live summary,
and an on-demand capture of a few steps in the middle of the run, with no restart."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from dist_jobs import finish_job, free_port, start_job  # type: ignore[import-not-found]
from polars.testing import assert_frame_equal

import stallscope
from stallscope.analysis import STALL_COLUMNS, match_collectives

pytestmark = pytest.mark.torch

_CLI = [sys.executable, "-m", "stallscope.cli.main"]


def _summary_steps(run: Path) -> int:
    try:
        s = stallscope.load_summary(run)
    except stallscope.RunDirError:  # not there yet
        return 0
    return int(s["step"].max() or 0) if s.height else 0  # type: ignore[arg-type]


def test_capture_in_the_middle_of_a_continuous_ddp_job(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ("--steps", "400", "--mode", "continuous", "--window-steps", "20")
    procs = start_job(2, run, *args, "--flush-interval", "0.2", "--step-sleep", "0.01")
    try:
        deadline = time.monotonic() + 150
        while _summary_steps(run) < 30:
            assert time.monotonic() < deadline, "no summary rows"
            assert all(p.poll() is None for p in procs), "a rank ended early"
            time.sleep(0.2)
        top = subprocess.run([*_CLI, "top", str(run), "--once"], capture_output=True, text=True)
        assert top.returncode == 0, top.stderr
        assert "2 rank(s)" in top.stdout and "slowest rank:" in top.stdout
        cap = subprocess.run(
            [*_CLI, "capture", str(run), "--steps", "8", "--id", "mid", "--signal", "--wait", "90"],
            capture_output=True,
            text=True,
        )
        assert cap.returncode == 0, cap.stdout + cap.stderr
        assert "capture mid: done, 2 rank(s)" in cap.stdout
    finally:
        done = finish_job(procs, timeout=300)
    for r in done:
        assert r.returncode == 0, r.stdout[-3000:]
    # the capture: the same 8 steps on both ranks, collectives matched across them
    captured = stallscope.load(run / "captures" / "mid")
    table = stallscope.stall_table(captured)
    steps = table.group_by("rank").agg(pl.col("step").sort()).sort("rank")["step"].to_list()
    assert len(steps) == 2 and steps[0] == steps[1] and len(steps[0]) == 8
    assert steps[0] == list(range(steps[0][0], steps[0][0] + 8)) and steps[0][0] > 30
    m = match_collectives(captured)
    assert m.height > 0 and (m["members"] == 2).all()
    # the summary says the same of those steps: exactly on the ranks' own clocks (one host:
    # one CLOCK_MONOTONIC), and within a microsecond on rank 0's (the summary moves each
    # instant by its own shift, load() an event's end by its start's)
    cols = ["rank", "step", "step_ns", *STALL_COLUMNS]
    s = stallscope.load_summary(run)
    assert s.filter(pl.col("step") <= 400).height == 800 and s["matched"].all()
    local = stallscope.load_summary(run, align_clocks=False)
    own = stallscope.stall_table(stallscope.load(run / "captures" / "mid", align_clocks=False))
    assert_frame_equal(local.filter(pl.col("step").is_in(steps[0])).select(cols), own.select(cols))
    diff = s.filter(pl.col("step").is_in(steps[0])).select(cols) - table.select(cols)
    assert diff.select(pl.all().abs().max()).max_horizontal().item() <= 1000
    assert (table["data_ns"] > 5_000_000).all()  # the 10 ms data wait (less what comm took)
    # the events kept: the window, not the 400 steps
    kept = stallscope.stall_table(run)
    assert kept.group_by("rank").len()["len"].max() < 150  # type: ignore[operator]
    doc = json.loads((run / "run.json").read_text())
    for p in doc["processes"].values():
        assert p["mode"] == "continuous" and p["continuous"]["window"]["parts_deleted"] > 0
        assert [c["id"] for c in p["continuous"]["captures"]] == ["mid"]


TRAIN = """
import torch, torch.distributed as dist
import stallscope
torch.set_num_threads(1)
dist.init_process_group("gloo")
net = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 4))
for _ in range(12):
    stallscope.step()
    net(torch.randn(8, 32)).sum().backward()
dist.destroy_process_group()
"""


def test_profile_in_continuous_mode(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    out = tmp_path / "run"
    cmd = [*_CLI, "profile", "--out", str(out), "--mode", "continuous", "--", sys.executable,
           "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
           str(free_port()), "train.py"]  # fmt: skip
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    s = stallscope.load_summary(out)
    assert sorted(s["rank"].unique().to_list()) == [0, 1]
    assert s.filter(pl.col("rank") == 0)["step"].to_list() == list(range(1, 13))
    doc = json.loads((out / "run.json").read_text())
    assert {p["mode"] for p in doc["processes"].values()} == {"continuous"}
