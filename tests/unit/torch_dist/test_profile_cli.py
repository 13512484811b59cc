"""`stallscope profile -- torchrun ... train.py`: every rank traced, train.py unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from dist_jobs import free_port  # type: ignore[import-not-found]

import stallscope
from stallscope.analysis import match_collectives
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


def _profile(out: Path, *command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "stallscope.cli.main",
            "profile",
            "--out",
            str(out),
            "--",
            *command,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )


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


def test_profile_returns_the_command_exit_status(tmp_path: Path) -> None:
    r = _profile(tmp_path / "run", sys.executable, "-c", "import sys; sys.exit(5)", cwd=tmp_path)
    assert r.returncode == 5


def test_launcher_detection() -> None:
    assert launcher_mode(("torchrun", "--nproc-per-node", "2", "train.py"))
    assert launcher_mode(("/usr/bin/python3", "-m", "torch.distributed.run", "train.py"))
    assert not launcher_mode(("python", "train.py"))
