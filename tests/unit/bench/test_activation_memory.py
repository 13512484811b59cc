"""bench/activation_memory.py: what a Llama block keeps for its backward, measured, against the
planner's per-layer activations, on tiny sizes (eager) and in the committed result (eager and
compiled)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "bench" / "activation_memory.py"
COMMITTED = json.loads((ROOT / "bench" / "results" / "activation_memory.json").read_text())


def test_the_committed_measurements_are_the_planners() -> None:
    rows = COMMITTED["rows"]
    assert {(r["shape"], r["policy"], r["compiled"]) for r in rows} == {
        (s, p, c) for s in ("gqa", "mha") for p in ("none", "full", "ops") for c in (False, True)
    }
    for r in rows:  # within 0.1 byte per token x hidden (per-token scalars: the norms' roots)
        assert r["measured_per_sbh"] == pytest.approx(r["planner_per_sbh"], abs=0.1), r


@pytest.mark.torch
def test_eager_blocks_measured_again(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the script runs Llama blocks with torch")
    out = tmp_path / "activation_memory.json"
    args = ["--seq", "128", "--batch", "2", "--eager-only", "--out", str(out)]
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 6 and not any(row["compiled"] for row in rows)
    for row in rows:
        assert row["measured_per_sbh"] == pytest.approx(row["planner_per_sbh"], abs=0.15), row
