"""Steps and CPU compute found in a program that marks neither (the auto_steps backend that
`stallscope profile` attaches): optimizer steps first, then torch.profiler's steps, then the
model's forward; a program's own markers win."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import stallscope
from stallscope.analysis import STALL_COLUMNS, stall_table, step_windows

pytestmark = pytest.mark.torch


def _model() -> Any:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _source(run: Path) -> dict[str, Any]:
    (entry,) = json.loads((run / "run.json").read_text())["processes"].values()
    src: dict[str, Any] = entry["step_source"]
    return src


def _names(ev: pl.DataFrame) -> list[str]:
    return ev.filter(pl.col("kind") == "region")["name"].to_list()


def test_optimizer_steps_end_the_steps(tmp_path: Path) -> None:
    import torch

    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()  # no parameters: not taken for the model
    data = torch.utils.data.TensorDataset(torch.randn(80, 32), torch.randint(0, 4, (80,)))
    with stallscope.trace(tmp_path, backends=["auto_steps"]):
        for x, y in torch.utils.data.DataLoader(data, batch_size=16):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        time.sleep(0.05)  # teardown after the last step: in no step
    ev = stallscope.load(tmp_path)
    src = _source(tmp_path)
    assert src["source"] == "optimizer" and src["by"] == "SGD.step"
    assert src["model"] == "Sequential.forward" and src["steps"] == 5
    assert src["first_step"] == "starts at the model's first forward"
    table = stall_table(ev)
    assert table["step"].to_list() == [1, 2, 3, 4, 5]
    assert (table["compute_ns"] > 0).all()
    assert (table.tail(4)["data_ns"] > 0).all()  # each later step waits for its batch
    assert (table["step_ns"] < 40_000_000).all()  # the 50 ms sleep is in none
    names = _names(ev)
    assert names.count("forward") == names.count("backward") == names.count("optimizer") == 5
    opt_ends = ev.filter(pl.col("name") == "optimizer")["end_ns"].to_list()
    w = step_windows(ev)
    assert w["end_ns"].to_list() == opt_ends  # each step ends with its optimizer step
    first_fwd = ev.filter(pl.col("name") == "forward")["start_ns"].min()
    assert w["start_ns"][0] <= first_fwd  # step 1 opens at the first forward


def test_only_the_first_optimizer_to_step_counts(tmp_path: Path) -> None:
    import torch

    gen, disc = _model(), _model()
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
    with stallscope.trace(tmp_path, backends=["auto_steps"]):
        for _ in range(3):
            disc(torch.randn(8, 32)).sum().backward()
            opt_d.step()
            gen(torch.randn(8, 32)).sum().backward()
            opt_g.step()
    ev = stallscope.load(tmp_path)
    assert _source(tmp_path)["steps"] == 3
    assert _names(ev).count("optimizer") == 6  # both are compute
    assert step_windows(ev).height == 3


def test_profiler_steps_when_no_optimizer_steps(tmp_path: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    model = _model()
    with (
        stallscope.trace(tmp_path, backends=["auto_steps"]),
        profile(activities=[ProfilerActivity.CPU]) as prof,
    ):
        for _ in range(4):
            with torch.no_grad():
                model(torch.randn(8, 32))
            prof.step()
    src = _source(tmp_path)
    assert src["source"] == "profiler" and src["steps"] == 4
    table = stall_table(stallscope.load(tmp_path))
    assert table.height == 4 and (table["compute_ns"] > 0).all()


def test_forward_steps_of_inference(tmp_path: Path) -> None:
    import torch

    model = _model()
    with stallscope.trace(tmp_path, backends=["auto_steps"]), torch.no_grad():
        for _ in range(3):
            model(torch.randn(8, 32))
            time.sleep(0.002)
        time.sleep(0.05)
    ev = stallscope.load(tmp_path)
    src = _source(tmp_path)
    assert src["source"] == "forward" and src["by"] == "Sequential.forward"
    assert src["steps"] == 3
    w = step_windows(ev)
    fwd = ev.filter(pl.col("name") == "forward")
    assert w["start_ns"].to_list() == fwd["start_ns"].to_list()
    assert w["end_ns"][-1] == fwd["end_ns"][-1]  # the last step ends with the last forward


def test_a_programs_own_markers_win(tmp_path: Path) -> None:
    import torch

    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with stallscope.trace(tmp_path, backends=["auto_steps"]):
        for _ in range(3):
            stallscope.step()
            model(torch.randn(8, 32)).sum().backward()
            opt.step()
    ev = stallscope.load(tmp_path)
    assert _source(tmp_path)["source"] == "stallscope.step"
    assert step_windows(ev)["step"].to_list() == [1, 2, 3]


def test_nothing_found(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path, backends=["auto_steps"]):
        stallscope.mark("idle")
    src = _source(tmp_path)
    assert src["source"] == "none"
    assert stall_table(stallscope.load(tmp_path)).height == 0


def test_each_trace_finds_its_own_model(tmp_path: Path) -> None:
    import torch

    first, second = _model(), _model()
    for i, m in enumerate((first, second)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        with stallscope.trace(tmp_path / str(i), backends=["auto_steps"]):
            for _ in range(2):
                m(torch.randn(4, 32)).sum().backward()
                opt.step()
        first(torch.randn(4, 32))  # after the trace: not recorded
        table = stall_table(stallscope.load(tmp_path / str(i)))
        assert table.height == 2
        assert sum(table[c].sum() for c in STALL_COLUMNS) == table["step_ns"].sum()


def test_no_regions_outside_an_auto_steps_trace(tmp_path: Path) -> None:
    import torch

    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with stallscope.trace(tmp_path, backends=["auto_steps"]):
        model(torch.randn(4, 32)).sum().backward()
        opt.step()
    with stallscope.trace(tmp_path / "plain", backends=()):  # hooks stay, and stay quiet
        stallscope.step()
        model(torch.randn(4, 32)).sum().backward()
        opt.step()
    assert _names(stallscope.load(tmp_path / "plain")) == []
