"""Another CUPTI user (a subscriber such as Nsight, torch.profiler, an injected tool) is detected
and reported; stallscope then leaves CUPTI alone (never registers its callbacks over the other
tool's) and the trace itself goes on. CUPTI refusing to start (no driver) is reported the same."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import stallscope
from stallscope.capture import _cupti
from stallscope.exceptions import StallscopeWarning
from stallscope.io._run_json import read_run_json
from tests.unit.cupti.conftest import Fake


def cupti_entry(run: Path) -> dict[str, object]:
    entry = next(iter(read_run_json(run)["processes"].values()))
    out: dict[str, object] = entry["backends"]["cupti"]
    return out


def test_other_subscriber_detected_and_left_alone(fake: Fake, tmp_path: Path) -> None:
    fake.set_other_subscriber(1)
    run = tmp_path / "run"
    t = stallscope.trace(run, backends=["cupti"])
    with pytest.warns(StallscopeWarning, match="MULTIPLE_SUBSCRIBERS"):
        t.start()
    stallscope.step()
    stallscope.mark("cpu side still traced")
    assert fake.counter(7) == 0, "stallscope did not take the other tool's buffer callbacks"
    assert not fake.kind_enabled(10)
    t.stop()
    assert "another CUPTI subscriber" in str(cupti_entry(run)["error"])
    assert stallscope.load(run).filter(pl.col("kind") == "mark").height == 1
    # backends() now says why.
    b = stallscope.backends().filter(pl.col("backend") == "cupti").row(0, named=True)
    assert b["available"] is False
    assert "another subscriber" in b["reason"]
    assert fake.finalized() == 0


@pytest.mark.torch
def test_torch_profiler_active_is_detected(fake: Fake, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        assert any("torch.profiler" in o for o in _cupti.other_tools())
        ok, why = _cupti.status()
        assert not ok
        assert "torch.profiler is active" in why
        assert _cupti.BACKEND.default_on() is False
        with (
            pytest.warns(StallscopeWarning, match="torch.profiler"),
            stallscope.trace(tmp_path / "run", backends=["cupti"]),
        ):
            assert fake.counter(7) == 0
    assert not any("torch.profiler" in o for o in _cupti.other_tools())


def test_nsight_injection_env_detected(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsight-systems/libToolsInjection64.so")
    ok, why = _cupti.status()
    assert not ok
    assert "CUDA_INJECTION64_PATH" in why
    monkeypatch.delenv("CUDA_INJECTION64_PATH")
    monkeypatch.setenv("NSYS_PROFILING_SESSION_ID", "1")
    assert any("Nsight" in o for o in _cupti.other_tools())


def test_enable_refused_reports_and_undoes(fake: Fake, tmp_path: Path) -> None:
    # What the real libcupti does without a driver: every enable returns CUPTI_ERROR_UNKNOWN.
    fake.set_fail(b"cuptiActivityEnable", 999)
    run = tmp_path / "run"
    with (
        pytest.warns(StallscopeWarning, match="CONCURRENT_KERNEL"),
        stallscope.trace(run, backends=["cupti"]),
    ):
        stallscope.mark("x")
    err = str(cupti_entry(run)["error"])
    assert "CUPTI_ERROR_UNKNOWN" in err
    assert "no NVIDIA driver or no GPU" in err
    assert fake.runtime_enabled_count() == 0
    assert not stallscope._core.cupti_active()


def test_optional_kind_refused_is_reported_not_fatal(fake: Fake, tmp_path: Path) -> None:
    fake.set_fail(b"MARKER", 27)  # CUPTI_ERROR_NOT_SUPPORTED for MARKER only
    run = tmp_path / "run"
    with stallscope.trace(run, backends=["cupti"]):
        fake.kernel("_Z6kernelv")
    meta = cupti_entry(run)
    assert meta["refused"] == ["MARKER: CUPTI_ERROR_NOT_SUPPORTED"]
    assert stallscope.load(run).filter(pl.col("kind") == "kernel").height == 1


def test_timestamp_callback_refused_stops_before_enabling(fake: Fake, tmp_path: Path) -> None:
    fake.set_fail(b"cuptiActivityRegisterTimestampCallback", 999)
    t = stallscope.trace(tmp_path / "run", backends=["cupti"])
    with pytest.warns(StallscopeWarning, match="RegisterTimestampCallback"):
        t.start()
    assert not fake.kind_enabled(10), "no kind enabled without stallscope's clock"
    t.stop()


def test_callbacks_taken_over_mid_trace_is_reported(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"
    t = stallscope.trace(run, backends=["cupti"]).start()
    fake.kernel("_Z6kernelv")  # our buffers now hold a launch record and a kernel record
    fake.hijack()  # e.g. torch.profiler started inside the trace
    fake.kernel("_Z6kernelv")
    with pytest.warns(StallscopeWarning, match="took over CUPTI's activity callbacks"):
        t.stop()
    meta = cupti_entry(run)
    assert meta["stats"]["buffers_outstanding"] == 2  # type: ignore[index]
    assert "another tool" in str(meta["warning"])
