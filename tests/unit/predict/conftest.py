"""Fixtures of the predictor's tests: the repository's real Kineto trace sets, and real runs of
the demo workload (1 and 2 ranks, gloo, CPU) made once per test session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]  # the repository root
REPO_KINETO = ROOT / "tests" / "data" / "kineto"


def _demo(out: Path, ranks: int, steps: int) -> Path:
    """Run the demo workload (batch 32, no loader workers) on ``ranks`` ranks into ``out``."""
    launch = (
        ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
        if ranks > 1
        else []
    )
    cmd = [
        sys.executable,
        *launch,
        "-m",
        "stallscope.workloads._demo",
        "--out",
        str(out),
        "--steps",
        str(steps),
        "--batch-size",
        "32",
        "--workers",
        "0",
    ]
    subprocess.run(cmd, check=True, timeout=300, capture_output=True)
    return out


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 2-rank DDP run (gloo, CPU) of the demo workload, 8 steps."""
    pytest.importorskip("torch", reason="the demo workload needs torch")
    return _demo(tmp_path_factory.mktemp("demo") / "run", 2, 8)


@pytest.fixture(scope="session")
def demo_run_1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 1-rank run of the demo workload, 8 steps."""
    pytest.importorskip("torch", reason="the demo workload needs torch")
    return _demo(tmp_path_factory.mktemp("demo1") / "run", 1, 8)
