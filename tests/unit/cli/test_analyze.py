"""`stallscope analyze` on one node: the runs, both estimates side by side, the JSON, and the
errors a user gets for a failing program or one that records no steps."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from stallscope.differential import STALLS_SCHEMA

CLI = [sys.executable, "-m", "stallscope.cli.main", "analyze"]


def _analyze(args: list[str], timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.torch
def test_torchrun_job_on_one_node_both_estimates_and_json(tmp_path: Path) -> None:
    pytest.importorskip("PIL", reason="the workload's images need Pillow (the data extra)")
    out, js = tmp_path / "out", tmp_path / "a.json"
    p = _analyze(
        [
            "--nodes", "1", "--steps", "4", "--warmup", "1", "--cold", "fadvise", "--no-guard",
            "--out", str(out), "--json", str(js), "--",
            "torchrun", "--nproc-per-node", "2", "-m", "stallscope.workloads._train",
            "--depth", "1", "--width", "32", "--batch-size", "8", "--images", "256",
            "--side", "24", "--crop", "16", "--workers", "0", "--data", str(tmp_path / "img"),
        ]
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "G = 2 device(s) (1 node(s) x 2)" in p.stderr
    for line in ("[1/4] one: 1 rank(s)", "[2/4] synthetic: 2 rank(s)", "[4/4] cold: 2 rank(s)"):
        assert line in p.stderr
    assert "runs: trace-based stall table" in p.stdout
    assert "stalls: differential method beside the trace of the same runs" in p.stdout
    assert "page cache before cold: fadvise" in p.stdout
    assert "note: network stall not measured: 1 node" in p.stdout
    doc = json.loads(js.read_text())
    assert [r["run"] for r in doc["runs"]] == ["one", "synthetic", "cached", "cold"]
    for r in doc["runs"]:
        assert r["steps"] == 4 and r["samples_per_step"] == 8.0 and r["step_ns"] > 0
        assert math.isclose(sum(r["trace"].values()), r["step_ns"], rel_tol=1e-9)
        assert Path(r["run_dir"]).is_dir()
    assert doc["runs"][0]["ranks"] == 1 and doc["runs"][1]["ranks"] == 2
    cold = doc["runs"][3]["page_cache"]
    assert cold["mode"] == "cold" and cold["by_script"]["method"] == "fadvise"
    assert cold["by_script"]["files"] == 256
    assert set(doc["stalls"]) == {"prep", "fetch", "data", "interconnect"}
    for k, v in doc["stalls"].items():
        assert set(v) == {"ns_per_sample", "share_pct", "ns_per_step", "runs"}, k
        assert v["ns_per_sample"] == pytest.approx(v["ns_per_step"] / 8)
        assert set(doc["trace"][k]) >= {"ns_per_sample", "share_pct", "ns_per_step"}
        assert doc["disagreement"][k]["pct_points"] == pytest.approx(
            doc["trace"][k]["share_pct"] - v["share_pct"]
        )
    runs = {r["run"]: r for r in doc["runs"]}
    assert doc["stalls"]["prep"]["ns_per_step"] == pytest.approx(
        runs["cached"]["step_ns"] - runs["synthetic"]["step_ns"]
    )
    assert doc["stalls"]["interconnect"]["share_pct"] == pytest.approx(
        100 * (runs["synthetic"]["step_ns"] - runs["one"]["step_ns"]) / runs["synthetic"]["step_ns"]
    )
    assert "comm_ns_per_step" in doc["trace"]["fetch"]
    assert doc["settings"]["devices"] == 2 and doc["settings"]["skip"] == []
    assert len(STALLS_SCHEMA) == 13


def test_a_failing_program_names_the_run_and_its_logs(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("import sys\nprint('cannot find my data')\nsys.exit(3)\n")
    p = _analyze(["--nodes", "1", "--skip", "data", "--no-guard", "--out", str(tmp_path / "o"),
                  "--", sys.executable, str(script)])  # fmt: skip
    assert p.returncode == 1
    assert (
        "run synthetic (1 rank(s) on 1 node(s), data synthetic) failed on rank(s) [0]" in p.stderr
    )
    assert "cannot find my data" in p.stderr and str(tmp_path / "o" / "logs") in p.stderr
    assert "Traceback" not in p.stderr


def test_a_program_without_steps_says_how_to_mark_them(tmp_path: Path) -> None:
    script = tmp_path / "nosteps.py"
    script.write_text("import stallscope\nstallscope.mark('hello')\n")
    p = _analyze(["--nodes", "1", "--skip", "data", "--no-guard", "--out", str(tmp_path / "o"),
                  "--", sys.executable, str(script)])  # fmt: skip
    assert p.returncode == 1
    assert "run synthetic" in p.stderr and "stallscope.data.synthetic(loader)" in p.stderr
    assert "Traceback" not in p.stderr


def test_no_command_and_a_bad_launcher_option() -> None:
    p = _analyze([])
    assert p.returncode == 2 and "Missing argument 'COMMAND...'" in p.stderr
    p = _analyze(["--no-guard", "--", "torchrun", "--bogus", "t.py"])
    assert p.returncode == 1 and "'--bogus' is not understood" in p.stderr
