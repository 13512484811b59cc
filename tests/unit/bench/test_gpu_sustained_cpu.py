"""bench/gpu_sustained.py end to end on the CPU (tiny sizes): cold and hot probes paired, the
heat's steps timed with its drift, the weight-gradient rows, no NVML samples without a GPU and
no efficiency table touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "gpu_sustained.py"


def test_gpu_sustained_script_runs_on_the_cpu(tmp_path: Path) -> None:
    out, tables = tmp_path / "gpu_sustained.json", tmp_path / "tables"
    args = ["--device", "cpu", "--quick", "--idle-s", "0.2", "--heat-s", "0.5"]
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out", str(out), "--tables", str(tables)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["device"] and doc["nvml_limits"] == {"error": "no GPU"}
    pairs = doc["summary"]["pairs"]
    assert len(pairs) == len(doc["cold"]) == len(doc["hot"]) >= 2
    assert all(p["hot_over_cold"] > 0 for p in pairs)
    heat = doc["heat"]
    assert heat["steps"] == len(heat["step_seconds"]) >= 5  # MIN_STEPS however slow
    assert heat["step_last_over_first"] == pytest.approx(heat["step_last_s"] / heat["step_first_s"])
    assert {w["accumulate"] for w in doc["wgrad"]} == {"unfused"}  # fused: CUDA only
    assert all(w["ratio"] > 0 for w in doc["wgrad"])
    assert doc["samples"] == [] and doc["nvml"]["heat"] == {"samples": 0}
    assert not tables.exists()  # measured nothing of the device: its table stays


def _module() -> object:
    import importlib.util

    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("gpu_sustained", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_phase_statistics_of_fake_nvml_samples() -> None:
    m = _module()
    power_cap, thermal = 0x4, 0x40
    samples = [
        {"phase": "heat", "sm_MHz": mhz, "power_W": 700.0, "temp_C": 70, "reasons": bits}
        for mhz, bits in ((1980, 0), (1755, power_cap), (1700, power_cap | thermal))
    ] + [{"phase": "idle", "sm_MHz": 345, "power_W": 90.0, "temp_C": 40, "reasons": 1}]
    s = m.phase_stats(samples, "heat")  # type: ignore[attr-defined]
    assert s["samples"] == 3 and s["sm_MHz"] == {"median": 1755, "min": 1700, "max": 1980}
    assert s["share_power_cap"] == pytest.approx(2 / 3)
    assert s["share_thermal"] == pytest.approx(1 / 3) and s["share_hw_slowdown"] == 0
    assert m.phase_stats(samples, "hot") == {"samples": 0}  # type: ignore[attr-defined]


def test_drift_compares_the_first_and_last_window() -> None:
    m = _module()
    steps = [(0.0, 9.0), (0.1, 9.0)] + [(0.2 + i, 1.0 + 0.01 * i) for i in range(60)]
    d = m.drift(steps, 5.0)  # type: ignore[attr-defined]
    assert d["step_first_s"] == pytest.approx(1.025)  # 0.2 .. 5.2 s: warm-up steps left out
    assert d["step_last_s"] == pytest.approx(1.565)  # 54.2 .. 59.2 s
    assert d["step_last_over_first"] == pytest.approx(1.565 / 1.025)
