"""`stallscope demo`: the README's main job, on the built-in workload."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import stallscope
from stallscope.analysis import STALL_COLUMNS, STALL_MEANINGS


def printed_table(stdout: str) -> list[dict[str, float]]:
    """The rows of the first table in `stdout`, by column header (numbers). The table: a title
    line, header lines (a header may wrap between words), a rule of "─", rows, a blank line.
    Columns are right-justified, so a header word belongs to the column whose right edge it
    ends on."""
    lines = stdout.splitlines()
    rule = next(i for i, line in enumerate(lines) if line and set(line) == {"─"})
    rows = lines[rule + 1 : lines.index("", rule)]
    edges = [m.end() for m in re.finditer(r"\S+", rows[0])]
    words: list[list[str]] = [[] for _ in edges]
    title = next(i for i in range(rule, -1, -1) if "(ms)" in lines[i])
    for line in lines[title + 1 : rule]:
        for m in re.finditer(r"\S+", line):
            words[edges.index(m.end())].append(m.group())
    names = [" ".join(w) for w in words]
    return [
        {n: float(v.replace(",", "")) for n, v in zip(names, row.split(), strict=True)}
        for row in rows
    ]


@pytest.mark.torch
def test_demo_single_process_traces_real_training_and_prints_each_step(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "stallscope.cli.main",
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
    assert "stalls per step and rank (ms)" in p.stdout and "0 events dropped" in p.stdout
    printed = printed_table(p.stdout)
    assert [(r["rank"], r["step"]) for r in printed] == [(0.0, float(s)) for s in range(1, 7)]
    assert all(r["compute"] > 0 and r["data"] > 0 for r in printed)
    assert "sync wait" not in printed[0] and "interconnect" not in printed[0]  # one process
    assert "run: compute " in p.stdout
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
        [sys.executable, "-m", "stallscope.cli.main", "demo", "--steps", "zero"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "Invalid value for '--steps'" in p.stderr


@pytest.mark.torch
def test_demo_two_rank_ddp_over_loopback_tells_the_story(tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "stallscope.cli.main",
            "demo",
            "--steps",
            "4",
            "--network",
            "loopback",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "[1/5] capture: 2-rank DDP (gloo) on this machine, over loopback" in p.stdout
    assert "step 4/4" in p.stdout  # the progress of the training, step by step
    assert "[2/5] stall table" in p.stdout
    # the look ahead, with the predictor and the recommender this stallscope has
    assert "[3/5] prediction: the same job on 4 and 8 nodes, each linked at 500mbit" in p.stdout
    assert "4 nodes x 1 rank(s): step " in p.stdout and "8 nodes x 1 rank(s): step " in p.stdout
    assert "[4/5] recommendation: 100,000 steps of this job in the cloud" in p.stdout
    assert "100,000 steps within 24h (the demo's CPU compute standing for a T4's): " in p.stdout
    # the legend: every category, in one line of the package's one definition each
    flat = " ".join(p.stdout.split())
    for category, meaning in STALL_MEANINGS.items():
        assert f"{category.replace('_', ' ')} {meaning}" in flat
    assert f"[5/5] HTML report {out / 'report.html'}" in flat
    page = (out / "report.html").read_text()
    for sid in ("stalls", "timeline", "bandwidth", "stragglers", "prediction", "pareto"):
        assert f'data-section="{sid}">' in page, sid  # present, with data
    ev = stallscope.load(out)
    assert sorted(ev["rank"].unique().to_list()) == [0, 1]
    assert ev.filter(pl.col("kind") == "bucket").height > 0
    matched = stallscope.analysis.match_collectives(ev)
    assert matched.height > 0 and matched["complete"].all()

    # The stall table of the run: DDP's wait for the last bucket's all-reduce (inside the
    # "backward" region) is communication, and the categories sum to the step time.
    table = stallscope.stall_table(ev)
    assert table.height == 8
    comm = pl.sum_horizontal("sync_wait_ns", "network_ns", "interconnect_ns")
    assert (table.select(pl.sum_horizontal(STALL_COLUMNS)).to_series() == table["step_ns"]).all()
    per_rank = table.group_by("rank").agg(comm.sum().alias("comm"), pl.col("step_ns").sum())
    assert (per_rank["comm"] > 0).all(), table
    # ... and no more than the buckets' own time (it is the exposed part of it)
    bucket_ns = (
        ev.filter(pl.col("kind") == "bucket")
        .group_by("rank")
        .agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("bucket_ns"))
    )
    both = per_rank.join(bucket_ns, on="rank")
    assert (both["comm"] <= both["bucket_ns"]).all()
    regions = ev.filter((pl.col("kind") == "region") & (pl.col("category") == "compute"))
    assert table["compute_ns"].sum() < (regions["end_ns"] - regions["start_ns"]).sum()

    # What the demo printed: the same table in ms, with a comm column > 0, and the run's shares.
    printed = printed_table(p.stdout)
    assert len(printed) == 8
    for got, want in zip(printed, table.sort("rank", "step").iter_rows(named=True), strict=True):
        assert (got["rank"], got["step"]) == (want["rank"], want["step"])
        assert got["total"] == pytest.approx(want["step_ns"] / 1e6, abs=0.006)
    assert sum(r.get("sync wait", 0) + r.get("interconnect", 0) for r in printed) > 0
    shares = next(line for line in p.stdout.splitlines() if line.strip().startswith("run: "))
    assert "compute " in shares and "data " in shares and "host " in shares
    comm_pct = float(shares.split("comm ")[1].split("%")[0])
    assert comm_pct > 0


@pytest.mark.torch
@pytest.mark.netns
def test_demo_on_the_test_bed_shows_network_time(tmp_path: Path) -> None:
    out = tmp_path / "tb"
    p = subprocess.run(
        [sys.executable, "-m", "stallscope.cli.main", "demo", "--steps", "4", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "on 2 emulated nodes, each node's link shaped to 500mbit" in p.stdout
    table = stallscope.stall_table(stallscope.load(out))
    assert table.height == 8
    assert (table.group_by("rank").agg(pl.col("network_ns").sum())["network_ns"] > 0).all()
    assert table["interconnect_ns"].sum() == 0  # the ranks are on different emulated nodes
    # the last step ends before teardown: its host time is like the others'
    host = table.sort("rank", "step").group_by("rank").agg(pl.col("host_ns"))
    for times in host["host_ns"].to_list():
        assert times[-1] < 20 * max(sorted(times)[len(times) // 2], 1_000_000)
