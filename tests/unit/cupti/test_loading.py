"""Finding libcupti (explicit path, toolkit, wheels), and `stallscope.backends()` saying why
CUPTI cannot run: no libcupti, no driver, no device, another subscriber."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import stallscope
from stallscope.capture import _cupti, _hooks
from tests.unit.cupti.conftest import Fake


def touch(p: Path) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"")
    return p


def test_candidates_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "cuda"
    a = touch(home / "lib64" / "libcupti.so.13")
    b = touch(home / "extras" / "CUPTI" / "lib64" / "libcupti.so")
    sp = tmp_path / "site-packages"
    w13 = touch(sp / "nvidia" / "cu13" / "lib" / "libcupti.so.13")
    w12 = touch(sp / "nvidia" / "cuda_cupti" / "lib" / "libcupti.so.12")
    monkeypatch.delenv(_cupti.ENV_LIBRARY, raising=False)
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(_cupti, "_site_dirs", lambda: [str(sp)])
    monkeypatch.setattr(_cupti, "_already_loaded", lambda: ["/proc/loaded/libcupti.so.12"])
    c = _cupti.candidates()
    assert c[0] == "/proc/loaded/libcupti.so.12"  # the copy torch already loaded wins
    i = c.index
    assert i(str(a)) < i(str(w13))
    assert i(str(b)) < i(str(w13)) < i(str(w12))
    assert c[-3:] == ["libcupti.so.13", "libcupti.so.12", "libcupti.so"]
    # An explicit path is the only one tried.
    monkeypatch.setenv(_cupti.ENV_LIBRARY, "/opt/my/libcupti.so")
    assert _cupti.candidates() == ["/opt/my/libcupti.so"]


def test_already_loaded_reads_process_maps() -> None:
    assert all("libcupti.so" in p for p in _cupti._already_loaded())


def test_device_status_respects_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    ok, why = _cupti._device_status()
    assert not ok
    assert "CUDA_VISIBLE_DEVICES" in why


NO_LIB_SCRIPT = """
import json, warnings, stallscope
rows = stallscope.backends().to_dicts()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with stallscope.trace(__import__("sys").argv[1], backends=["cupti"]):
        stallscope.mark("cpu")
default = [b.name for b in stallscope.capture._hooks.select(None)]
print(json.dumps({"rows": rows, "warnings": [str(x.message) for x in w], "default": default}))
"""


def run_script(script: str, env: dict[str, str], *args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    res: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def test_no_libcupti_at_all(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere" / "libcupti.so")
    res = run_script(NO_LIB_SCRIPT, {_cupti.ENV_LIBRARY: missing}, str(tmp_path / "run"))
    rows = {r["backend"]: r for r in res["rows"]}  # type: ignore[attr-defined]
    cupti = rows["cupti"]
    assert cupti["available"] is False
    assert cupti["default_on"] is False
    assert cupti["reason"].startswith("no libcupti")
    assert missing in cupti["reason"]
    assert "nvidia-cuda-cupti" in cupti["reason"]
    assert _cupti.ENV_LIBRARY in cupti["reason"]
    assert any("no libcupti" in w for w in res["warnings"])  # type: ignore[attr-defined]
    assert "cupti" not in res["default"]  # type: ignore[operator]
    assert stallscope.load(tmp_path / "run").height == 1  # the CPU trace went on


NO_CANDIDATE_SCRIPT = """
import json, stallscope
from stallscope.capture import _cupti
_cupti.candidates = lambda: ["/nonexistent/lib64/libcupti.so.13", "libcupti.so.0-none"]
_cupti._driver_status = lambda: (True, "driver")
_cupti._device_status = lambda: (True, "device")
print(json.dumps(stallscope.backends().to_dicts()))
"""


def test_no_candidate_loads_even_with_driver_and_device() -> None:
    out = subprocess.run(
        [sys.executable, "-c", NO_CANDIDATE_SCRIPT],
        env={k: v for k, v in os.environ.items() if k != _cupti.ENV_LIBRARY},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = {r["backend"]: r for r in json.loads(out.stdout.strip().splitlines()[-1])}
    reason = rows["cupti"]["reason"]
    assert rows["cupti"]["available"] is False
    assert reason.startswith("no libcupti")
    assert "/nonexistent/lib64/libcupti.so.13" in reason
    assert "libcupti.so.0-none" in reason


def test_real_libcupti_without_driver(tmp_path: Path) -> None:
    real = Path("/usr/local/cuda/lib64/libcupti.so.13")
    if not real.exists():
        pytest.skip("no CUDA toolkit libcupti at /usr/local/cuda/lib64")
    if Path("/proc/driver/nvidia").exists():
        pytest.skip("an NVIDIA driver is present: this test covers machines without one")
    res = run_script(NO_LIB_SCRIPT, {_cupti.ENV_LIBRARY: str(real)}, str(tmp_path / "run"))
    cupti = {r["backend"]: r for r in res["rows"]}["cupti"]  # type: ignore[attr-defined]
    assert cupti["available"] is False
    assert cupti["reason"].startswith("no driver")
    assert f"libcupti found at {real}" in cupti["reason"]  # found, not loaded: nothing to use
    # Named explicitly, it fails at start with CUPTI's own error, and the CPU trace goes on.
    assert any("CUPTI_ERROR_UNKNOWN" in w for w in res["warnings"])  # type: ignore[attr-defined]


def test_backends_reasons_with_fake(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    def row() -> dict[str, object]:
        r: dict[str, object] = (
            stallscope.backends().filter(pl.col("backend") == "cupti").row(0, named=True)
        )
        return r

    r = row()
    assert r["available"] is True
    assert r["default_on"] is True
    assert str(fake.path) in str(r["reason"])
    monkeypatch.setattr(_cupti, "_device_status", lambda: (False, "no GPU here"))
    r = row()
    assert r["available"] is False
    assert r["reason"] == "no device: no GPU here"
    assert _cupti.BACKEND.default_on() is False
    monkeypatch.setattr(_cupti, "_driver_status", lambda: (False, "libcuda.so.1: not found"))
    assert str(row()["reason"]).startswith("no driver: libcuda.so.1: not found")


def test_default_on_runs_without_naming_it(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run) as t:  # backends=None: those on by default here
        fake.kernel("_Z6kernelv")
    assert "cupti" in t.backend_info
    assert stallscope.load(run).filter(pl.col("kind") == "kernel").height == 1


def test_backends_reports_a_broken_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_hooks.BACKEND_MODULES, "broken", "stallscope._no_such_backend")
    b = stallscope.backends()
    assert b.columns == ["backend", "available", "default_on", "reason"]
    r = b.filter(pl.col("backend") == "broken").row(0, named=True)
    assert r["available"] is False
    assert "cannot load stallscope._no_such_backend" in r["reason"]
    assert set(_hooks.BACKEND_MODULES) == set(b["backend"])
