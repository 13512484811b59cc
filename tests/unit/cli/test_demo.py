"""`stallscope demo`: the README's main job, on the built-in workload."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import stallscope


@pytest.mark.torch
def test_demo_single_process_traces_real_training_and_prints_each_step(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "stallscope._cli.main",
            "demo",
            "--ranks",
            "1",
            "--steps",
            "6",
            "--workers",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert "captured per step" in p.stdout and "0 events dropped" in p.stdout
    ev = stallscope.load(out)
    windows = stallscope.analysis.step_windows(ev)
    assert windows["step"].to_list() == list(range(1, 7))
    names = set(ev.filter(pl.col("kind") == "region")["name"].to_list())
    assert names == {"forward", "backward", "optimizer"}
    assert ev.filter(pl.col("kind") == "data_wait").height == 6
    # the DataLoader's worker processes are fork()ed: none of them wrote into the run
    assert [p.name for p in out.glob("*.parquet")] == ["rank-00000.parquet"]


def test_cli_rejects_a_bad_flag_with_usage() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "stallscope._cli.main", "demo", "--steps", "zero"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "Invalid value for '--steps'" in p.stderr


@pytest.mark.torch
def test_demo_default_is_two_rank_ddp_with_matched_all_reduces(tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    p = subprocess.run(
        [sys.executable, "-m", "stallscope._cli.main", "demo", "--steps", "4", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "2-rank DDP" in p.stdout
    ev = stallscope.load(out)
    assert sorted(ev["rank"].unique().to_list()) == [0, 1]
    assert ev.filter(pl.col("kind") == "bucket").height > 0
    matched = stallscope.analysis.match_collectives(ev)
    assert matched.height > 0 and matched["complete"].all()
