"""bench/loss_memory.py: the bytes per logit each loss holds, measured on tiny sizes, and the
stack figures the planner charges for them (plan/data/stacks.json, the torchtitan runs of
bench/data/public_llm_training.json) equal to the committed measurement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stallscope.plan import load_stack, stack

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "bench" / "loss_memory.py"
COMMITTED = json.loads((ROOT / "bench" / "results" / "loss_memory.json").read_text())["losses"]


def test_the_stack_figures_are_the_measured_ones() -> None:
    eager, parallel = COMMITTED["eager"], COMMITTED["loss_parallel"]
    tt = stack("torchtitan-2024")  # eager loss, torch.compile on the blocks only
    assert tt.loss_bytes == round(eager["peak_bytes_per_logit"])
    assert tt.loss_parallel_bytes == round(parallel["peak_bytes_per_logit"])
    assert tt.loss_saved_bytes == round(eager["kept_bytes_per_logit"])
    runs = json.loads((ROOT / "bench" / "data" / "public_llm_training.json").read_text())
    runs = runs["entries"] if isinstance(runs, dict) else runs
    compiled = [e for e in runs if "compile'd" in json.dumps(e["stack"])]
    assert compiled, "the runs whose loss torch.compile compiled say so in their stack"
    for e in compiled:
        st = load_stack(e["stack"])
        assert st.loss_bytes == round(COMMITTED["compiled"]["peak_bytes_per_logit"])
        assert st.loss_saved_bytes == round(COMMITTED["compiled"]["kept_bytes_per_logit"])


@pytest.mark.torch
def test_measured_on_tiny_sizes(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the script runs the losses with torch")
    out = tmp_path / "loss_memory.json"
    # the output layer's own gradients, (vocab + tokens) x 256 x 2 bytes, stay below the
    # loss's peak from 1,024 tokens on (2 x 256 / tokens + 2 x 256 / vocab bytes a logit)
    args = ["--tokens", "1024", "--vocab", "8000", "--out", str(out)]
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(out.read_text())["losses"]
    for name, row in COMMITTED.items():  # the figures do not depend on the sizes
        assert got[name]["peak_bytes_per_logit"] == pytest.approx(
            row["peak_bytes_per_logit"], abs=0.3
        )
        assert got[name]["kept_bytes_per_logit"] == pytest.approx(
            row["kept_bytes_per_logit"], abs=0.3
        )
