"""`stallscope profile -- torchrun ... train.py`: every rank traced, train.py unchanged: its
steps found and its CPU compute recorded, and every way it can fail reported by the exit
status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from dist_jobs import free_port  # type: ignore[import-not-found]

import stallscope
from stallscope.analysis import match_collectives, stall_table
from stallscope.cli.profile import launcher_mode

TRAIN = """
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
model = torch.nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(4):
    model(torch.randn(16, 64)).sum().backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
"""


SINGLE = """
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.Adam(net.parameters())
loss_fn = torch.nn.CrossEntropyLoss()
data = torch.utils.data.TensorDataset(torch.randn(320, 64), torch.randint(0, 10, (320,)))
for x, y in torch.utils.data.DataLoader(data, batch_size=64):
    opt.zero_grad()
    loss_fn(net(x), y).backward()
    opt.step()
"""


def _profile(
    out: Path,
    *command: str,
    cwd: Path,
    flags: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "stallscope.cli.main",
            "profile",
            "-o",
            str(out),
            *flags,
            "--",
            *command,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def _steps_with_compute(out: Path) -> pl.DataFrame:
    """The stall table, after checking every step has compute (found with no code change)."""
    table = stall_table(stallscope.load(out))
    assert table.height > 0
    assert (table["compute_ns"] > 0).all(), table
    return table


@pytest.mark.torch
def test_profile_traces_every_torchrun_rank_of_an_unmodified_script(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    out = tmp_path / "run"
    cmd = (
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
        "train.py",
    )
    r = _profile(out, *cmd, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 rank(s) traced" in r.stderr
    assert "found from the optimizer's steps (the end of SGD.step ends each step" in r.stderr
    info = stallscope.run_info(out)
    assert info.ranks == [0, 1]
    assert info.problems == []  # the launcher itself is not traced; both ranks stopped cleanly
    ev = stallscope.load(out)
    m = match_collectives(ev)
    ar = m.filter(pl.col("name") == "all_reduce")
    assert ar.height >= 8
    assert (ar["members"] == 2).all()
    assert ev.filter(pl.col("kind") == "bucket").group_by("rank").len().height == 2
    doc = json.loads((out / "run.json").read_text())
    for p in doc["processes"].values():
        assert len(p["clock"]["offsets"]) == 2  # start (after init_process_group) and stop
        assert p["topology"]["nnodes"] == 1
        assert p["backends"]["torch_dist"]["backend"] == "gloo"
        src = p["step_source"]
        assert src["source"] == "optimizer" and src["by"] == "SGD.step" and src["steps"] == 4
        assert src["model"] == "DistributedDataParallel.forward"
    # 4 iterations: 4 steps per rank, each with its forward / backward / optimizer as compute
    table = _steps_with_compute(out)
    assert table.group_by("rank").len().sort("rank")["len"].to_list() == [4, 4]
    regions = ev.filter(pl.col("kind") == "region")
    for name in ("forward", "backward", "optimizer"):
        assert regions.filter(pl.col("name") == name).height == 8  # 4 per rank
    # The steps end at the last optimizer step: the teardown after it (destroy_process_group,
    # the clock sample at stop) is in no step.
    last_opt = regions.filter(pl.col("name") == "optimizer").group_by("rank").agg(pl.max("end_ns"))
    windows = stallscope.analysis.step_windows(ev).group_by("rank").agg(pl.max("end_ns"))
    for got, want in zip(
        windows.sort("rank")["end_ns"], last_opt.sort("rank")["end_ns"], strict=True
    ):
        assert abs(got - want) <= 10  # ns: load's clock alignment shifts each event by its start


@pytest.mark.torch
def test_profile_finds_steps_compute_and_data_of_a_single_process_script(tmp_path: Path) -> None:
    (tmp_path / "single.py").write_text(SINGLE)
    out = tmp_path / "run"
    r = _profile(out, sys.executable, "single.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "1 rank(s) traced" in r.stderr
    assert "Adam.step ends each step" in r.stderr
    table = _steps_with_compute(out)
    assert table.height == 5  # 320 samples in batches of 64
    assert (table["data_ns"] > 0).sum() >= 4  # the DataLoader's waits (the first is before step 1)
    assert table["step_ns"].sum() == sum(table[c].sum() for c in stallscope.analysis.STALL_COLUMNS)


@pytest.mark.torch
def test_profile_refuses_a_folder_holding_a_run_unless_overwrite(tmp_path: Path) -> None:
    (tmp_path / "single.py").write_text(SINGLE)
    out = tmp_path / "run"
    assert _profile(out, sys.executable, "single.py", cwd=tmp_path).returncode == 0
    first = (out / "rank-00000.parquet").stat().st_mtime_ns
    again = _profile(out, sys.executable, "single.py", cwd=tmp_path)
    assert again.returncode == 1
    assert "already holds a run (rank-00000.parquet, run.json)" in again.stderr
    assert "--overwrite" in again.stderr
    assert "Traceback" not in again.stderr
    assert (out / "rank-00000.parquet").stat().st_mtime_ns == first  # the program never ran
    over = _profile(out, sys.executable, "single.py", cwd=tmp_path, flags=("--overwrite",))
    assert over.returncode == 0, over.stderr[-3000:]
    assert (out / "rank-00000.parquet").stat().st_mtime_ns != first
    assert stallscope.run_info(out).problems == []


def test_profile_fails_when_a_process_was_not_traced(tmp_path: Path) -> None:
    # RANK beyond WORLD_SIZE: the trace cannot start; the program itself succeeds.
    env = dict(os.environ, RANK="5", WORLD_SIZE="2")
    r = _profile(tmp_path / "run", sys.executable, "-c", "pass", cwd=tmp_path, env=env)
    assert r.returncode == 1
    assert "rank 5 was not traced:" in r.stderr
    assert "Traceback" not in r.stderr


def test_profile_fails_when_nothing_python_ran(tmp_path: Path) -> None:
    r = _profile(tmp_path / "run", "true", cwd=tmp_path)
    assert r.returncode == 1
    assert "no process was traced" in r.stderr


def test_profile_returns_the_command_exit_status(tmp_path: Path) -> None:
    r = _profile(tmp_path / "run", sys.executable, "-c", "import sys; sys.exit(5)", cwd=tmp_path)
    assert r.returncode == 5
    assert "exited with status 5" in r.stderr


def test_launcher_detection() -> None:
    assert launcher_mode(("torchrun", "--nproc-per-node", "2", "train.py"))
    assert launcher_mode(("/usr/bin/python3", "-m", "torch.distributed.run", "train.py"))
    assert not launcher_mode(("python", "train.py"))
