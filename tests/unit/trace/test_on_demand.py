"""On-demand captures of a running continuous trace: the trigger file, the signal."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import stallscope
from stallscope.analysis import STALL_COLUMNS
from stallscope.capture._on_demand import TriggerError, parse_trigger

_COLS = ["rank", "step", "start_ns", "end_ns", "step_ns", *STALL_COLUMNS]
_OPTS: dict[str, Any] = {"mode": "continuous", "window_steps": 4, "flush_interval": 0.05}


def test_trigger_text() -> None:
    assert parse_trigger("12\n") == (12, None, None)
    assert parse_trigger("# keep\nsteps=3\nstart_step=40\nid=run-7.a\n") == (3, 40, "run-7.a")
    for bad, match in [
        ("", "no steps"),
        ("steps=0", "use 1 to"),
        ("steps=x", "whole number"),
        ("steps=3\nwhen=now", "unknown key"),
        ("three", "not key=value"),
        ("steps=3\nid=../up", "id="),
    ]:
        with pytest.raises(TriggerError, match=match):
            parse_trigger(bad)


def _steps(n: int, hook: Any = None) -> None:
    fwd = stallscope.region("forward", category="compute")
    for i in range(n):
        stallscope.step()
        if hook is not None:
            hook(i + 1)
        with fwd:
            time.sleep(0.004)


def _wait_for(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _entry(run: Path) -> dict[str, Any]:
    return json.loads((run / "run.json").read_text())["processes"]["rank-00000"]  # type: ignore[no-any-return]


def test_trigger_file_keeps_the_next_steps_of_a_running_trace(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run).mkdir()
    (run / "capture.trigger").write_text("5")  # there before the trace: not a request

    def hook(step: int) -> None:
        if step == 20:
            tmp = run / ".t"
            tmp.write_text("steps=6\nid=mid\n")
            os.replace(tmp, run / "capture.trigger")
            time.sleep(0.25)  # the writer polls every 12.5 ms here

    with stallscope.trace(run, **_OPTS):
        _steps(60, hook)
    cap = run / "captures" / "mid"
    assert sorted(p.name for p in cap.iterdir()) == [
        ".run.json.lock",
        "rank-00000.parquet",
        "run.json",
    ]
    table = stallscope.stall_table(stallscope.load(cap))
    first = table["step"].min()
    assert 20 < first < 35  # the next step when the request was seen
    assert table["step"].to_list() == list(range(first, first + 6))
    # the captured steps are exactly what the summary says of them
    s = stallscope.load_summary(run).filter(pl.col("step").is_in(table["step"].implode()))
    assert_frame_equal(s.select(_COLS), table)
    facts = json.loads((cap / "run.json").read_text())["processes"]["rank-00000"]["capture"]
    assert facts["first_step"] == first and facts["last_step"] == first + 5
    assert facts["complete"] and facts["source"] == "file"
    assert [c["id"] for c in _entry(run)["continuous"]["captures"]] == ["mid"]


def test_capture_signal_keeps_the_default_steps(tmp_path: Path) -> None:
    run = tmp_path / "run"
    sent: list[int] = []

    def hook(step: int) -> None:
        if step == 10:
            os.kill(os.getpid(), signal.SIGUSR1)
            sent.append(step)
            time.sleep(0.2)

    before = signal.getsignal(signal.SIGUSR1)
    with stallscope.trace(run, **_OPTS, capture_signal="SIGUSR1", capture_steps=3):
        assert signal.getsignal(signal.SIGUSR1) is not before
        _steps(30, hook)
    assert signal.getsignal(signal.SIGUSR1) is before  # restored at stop
    (cap,) = (run / "captures").iterdir()
    assert cap.name.startswith("signal-")
    table = stallscope.stall_table(stallscope.load(cap))
    assert table.height == 3 and table["step"].min() > 10


def test_requests_that_cannot_be_served_are_reported(tmp_path: Path) -> None:
    run = tmp_path / "run"

    def hook(step: int) -> None:
        if step in (5, 8, 40):
            text = {5: "steps=20\nid=a\n", 8: "steps=2\nid=b\n", 40: "steps=two\n"}[step]
            (run / "capture.trigger").write_text(text)
            time.sleep(0.15)

    with stallscope.trace(run, **_OPTS):
        _steps(45, hook)
    cont = _entry(run)["continuous"]
    assert [c["id"] for c in cont["captures"]] == ["a"]
    problems = " | ".join(cont["problems"])
    assert "request b (file) ignored: capture a was still running" in problems
    assert "no capture: not a whole number" in problems


def test_trace_that_stops_inside_a_capture_keeps_what_it_has(tmp_path: Path) -> None:
    run = tmp_path / "run"

    def hook(step: int) -> None:
        if step == 3:
            (run / "capture.trigger").write_text("steps=50\nid=long\n")
            time.sleep(0.15)

    with stallscope.trace(run, **_OPTS):
        _steps(12, hook)
    facts = _entry(run)["continuous"]["captures"][0]
    assert facts["id"] == "long" and not facts["complete"]
    table = stallscope.stall_table(stallscope.load(run / "captures" / "long"))
    assert 5 <= table.height <= 9 and table["step"].max() == 12


def test_explicit_start_step_and_a_rank_already_past_it(tmp_path: Path) -> None:
    run = tmp_path / "run"

    def hook(step: int) -> None:
        if step == 4:
            (run / "capture.trigger").write_text("steps=2\nstart_step=9\nid=later\n")
            time.sleep(0.15)
        if step == 12:
            time.sleep(0.3)  # the first capture ends (its lag is 0.1 s)
        if step == 14:
            (run / "capture.trigger").write_text("steps=2\nstart_step=3\nid=late\n")
            time.sleep(0.15)

    with stallscope.trace(run, **_OPTS):
        _steps(25, hook)
    cont = _entry(run)["continuous"]
    got = {c["id"]: (c["first_step"], c["last_step"]) for c in cont["captures"]}
    assert got["later"] == (9, 10)
    assert got["late"][0] > 14
    assert any("step 3 had begun" in p for p in cont["problems"])


def test_captures_need_continuous_mode(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run):  # full mode: no trigger file is looked at
        (run / "capture.trigger").write_text("3")
        time.sleep(0.15)
        _steps(6)
    assert not (run / "captures").exists()
