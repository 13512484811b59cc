"""bench/gpu_step_check.py end to end on the CPU (tiny sizes): the steps timed, a CPU trace with
no kernels, the planner's side for the named GPU with its parts summing to its step, and the
anchor refused with its reason (a CPU step is far slower than any GPU's)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "gpu_step_check.py"


def test_gpu_step_check_runs_on_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the script trains a model with torch")
    out = tmp_path / "gpu_step_check.json"
    args = ["--device", "cpu", "--quick", "--steps", "3", "--out", str(out)]
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    m = doc["measured"]
    assert len(m["step_seconds"]) == 3 and m["step_s"] > 0
    assert m["kernels_per_step_s"]["kernels"] == 0 and m["idle_per_step_s"] is None
    p = doc["planner"]
    assert p["gpu"] == "H200-SXM" and p["config"] == "tp1.pp1.dp1.mb1.rc-none.z0"
    assert sum(p["parts_s"].values()) == pytest.approx(p["step_s"], rel=1e-3)
    assert "longer than" in p["anchor"]["error"]
    assert "with_trace_table_step_s" not in p  # no kernels, no table


def test_kernel_classes_of_a_fake_trace(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_step_check", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    events = [  # two steps: microseconds, two streams overlapping for 5 us
        {"cat": "kernel", "name": "nvjet_tst_128x256_h_bz_coopA", "ts": 0, "dur": 40},
        {"cat": "kernel", "name": "cudnn_generated_fort_native_sdpa_sm90", "ts": 35, "dur": 20},
        {"cat": "kernel", "name": "vectorized_elementwise_kernel", "ts": 70, "dur": 10},
        {"cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 100},
    ]
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    got = mod.kernel_classes(trace, 2)  # type: ignore[attr-defined]
    want = {"gemm": 20e-6, "attention": 10e-6, "other": 5e-6, "busy": 32.5e-6, "kernels": 3}
    assert got == pytest.approx(want)
