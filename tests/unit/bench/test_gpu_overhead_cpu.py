"""bench/gpu_overhead.py end to end on the CPU (tiny sizes): every mode measured, the result
file written with the device named and the CUPTI parts skipped with their reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "gpu_overhead.py"


def test_gpu_overhead_script_runs_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu_overhead.json"
    r = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--device",
            "cpu",
            "--quick",
            "--repeats",
            "2",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--kinds",
            "--workloads",
            "transformer,resnet_b256",  # one launch-bound, one GPU-bound (tiny on the CPU)
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["device"].startswith("cpu") and doc["complete"]
    assert not doc["cupti"]["available"] and doc["cupti"]["skipped"]
    assert doc["kinds"]["skipped"]  # no CUDA device: the per-kind costs need one
    assert set(doc["workloads"]) == {"transformer", "resnet_b256"}
    for w in doc["workloads"].values():
        assert set(w["step_ms"]) == {
            "off",
            "stallscope",
            "continuous",
            "continuous_duty",
            "torch.profiler",
        }
        # one window in 3 steps (--quick) projected to the default one in 100
        duty = w["step_ms"]["continuous_duty"]
        assert duty["device_every"] == 3
        assert duty["projected_every_100"] == pytest.approx(duty["overhead"] * 3 / 100)
        for m in w["step_ms"].values():
            assert m["min"] <= m["q25"] <= m["median"] <= m["q75"] <= m["max"]
        assert all(len(t) == 2 for t in w["times_ms"].values())
        # a step marker and 3 regions a step, 3 steps a repeat (the last repeat's trace)
        assert w["trace_events"]["stallscope"]["events"] >= 12
        assert w["trace_events"]["continuous"]["events"] >= 12
        assert set(w["met"]) == {
            "stallscope",
            "continuous",
            "continuous_duty_projected",
            "stallscope_vs_profiler",
            "all",
        }
