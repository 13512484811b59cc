"""Device windows of a continuous trace, through the fake libcupti: CUPTI runs (and is
finalized) only for one step in `device_every` and for captured steps; the summary says which
steps have device columns; run.json counts the windows and sums every session's counts."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import polars as pl

import stallscope
from stallscope.io._summary_files import DEVICE_COLUMNS
from tests.unit.cupti.conftest import Fake

GEMM = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
_OPTS: dict[str, Any] = {
    "backends": ["cupti"],
    "mode": "continuous",
    "flush_interval": 0.05,
    "summary_lag_s": 0.1,
}


def _steps(fake: Fake, n: int, hook: Any = None) -> None:
    for i in range(n):
        stallscope.step()
        if hook is not None:
            hook(i + 1)
        fake.kernel(GEMM, duration_ns=200_000)
        time.sleep(0.005)


def _entry(run: Path) -> dict[str, Any]:
    return json.loads((run / "run.json").read_text())["processes"]["rank-00000"]  # type: ignore[no-any-return]


def _kernel_steps(run: Path) -> list[int]:
    k = stallscope.load(run).filter(pl.col("kind") == "kernel")
    steps = k["detail"].str.extract(r"step=(\d+)").cast(pl.Int64)
    return sorted(steps.to_list())


def test_one_step_in_every_has_device_events(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run, device_every=4, device_budget=1.0, **_OPTS):
        _steps(fake, 14)
    # one kernel a step, recorded in the windows only: steps 4, 8, 12
    assert _kernel_steps(run) == [4, 8, 12]
    assert fake.finalized() == 3  # each window ends with cuptiFinalize
    cupti = _entry(run)["backends"]["cupti"]
    assert cupti["duty"]["windows"] == 3 and cupti["duty"]["sessions"] == 3
    assert cupti["stats"]["kernels"] == 3  # the sessions' counts summed
    s = stallscope.load_summary(run).sort("step")
    assert s.filter(pl.col("device"))["step"].to_list() == [4, 8, 12]
    off = s.filter(~pl.col("device"))
    assert off.height == 11
    for c in DEVICE_COLUMNS:  # unknown outside the windows, never a made-up zero
        assert off[c].null_count() == off.height, c
    assert off["step_ns"].null_count() == 0
    on = s.filter(pl.col("device"))
    assert (on["compute_ns"] >= 150_000).all()  # the 200 us kernel of each traced step


def test_capture_turns_device_tracing_on_for_its_steps(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()

    def hook(step: int) -> None:
        if step == 10:
            tmp = run / ".t"
            tmp.write_text("steps=4\nid=dev\n")
            os.replace(tmp, run / "capture.trigger")
            time.sleep(0.3)  # the writer polls every 12.5 ms here

    with stallscope.trace(run, device_every=0, **_OPTS):
        _steps(fake, 30, hook)
    facts = json.loads((run / "captures" / "dev" / "run.json").read_text())["processes"][
        "rank-00000"
    ]["capture"]
    first = facts["first_step"]
    assert 10 < first < 25
    assert facts["device_steps"] == [first, first + 3]
    assert _kernel_steps(run / "captures" / "dev") == list(range(first, first + 4))
    assert fake.finalized() == 1
    s = stallscope.load_summary(run)
    assert sorted(s.filter(pl.col("device"))["step"].to_list()) == list(range(first, first + 4))


def test_device_every_one_keeps_cupti_on(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run, device_every=1, **_OPTS):
        _steps(fake, 5)
    assert _kernel_steps(run) == [1, 2, 3, 4, 5]
    assert fake.finalized() == 1
    assert "duty" not in _entry(run)["backends"]["cupti"]
    assert stallscope.load_summary(run)["device"].all()
