"""Under `stallscope profile` GPU capture starts at the model's first forward (the program has
set CUDA up by then): kernels from then on are recorded, run.json lists the CUPTI backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import stallscope
from stallscope.torch import _steps

pytestmark = pytest.mark.torch


def test_profile_starts_cupti_at_the_first_forward(
    tmp_path: Path, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(_steps, "_gpu_at_first_forward", False)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with stallscope.trace(tmp_path, backends=["auto_steps"]):
        _steps.gpu_capture_at_first_forward()
        fake.kernel("_Z6beforev")  # before the model ran: GPU capture not started
        for _ in range(2):
            model(torch.randn(4, 8)).sum().backward()
            fake.kernel("_Z4stepv")
            opt.step()
    ev = stallscope.load(tmp_path)
    kernels = ev.filter(pl.col("kind") == "kernel")["name"].to_list()
    assert kernels == ["step()", "step()"]
    (entry,) = json.loads((tmp_path / "run.json").read_text())["processes"].values()
    assert "cupti" in entry["backends"] and "error" not in entry["backends"]["cupti"]
    assert entry["step_source"]["source"] == "optimizer"
    # a GPU run: the kernels are the compute, the host regions annotate
    table = stallscope.stall_table(ev)
    assert table.height == 2


def test_without_the_request_no_gpu_capture(tmp_path: Path, fake: Any) -> None:
    import torch

    assert not _steps._gpu_at_first_forward
    model = torch.nn.Linear(8, 2)
    with stallscope.trace(tmp_path, backends=["auto_steps"]):
        model(torch.randn(4, 8))
        fake.kernel("_Z4stepv")
    (entry,) = json.loads((tmp_path / "run.json").read_text())["processes"].values()
    assert "cupti" not in entry["backends"]
