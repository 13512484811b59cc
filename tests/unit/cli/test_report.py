"""`stallscope report` and `stallscope export` on a real traced run, on Kineto traces (through
the importer, faked here) and on bad paths."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import polars as pl
import pytest
from click.testing import CliRunner

import stallscope
from stallscope._cli.main import cli
from stallscope._schema import conform
from stallscope.analysis import STALL_COLUMNS


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("report") / "run"
    with stallscope.trace(run):
        for _ in stallscope.loader(range(5), mark_steps=True):
            with stallscope.region("forward", category="compute"):
                time.sleep(0.002)
            with stallscope.region("optimizer", category="host"):
                time.sleep(0.001)
    return run


def test_report_json_of_a_traced_run(run_dir: Path) -> None:
    res = CliRunner().invoke(cli, ["report", str(run_dir), "--json"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    assert doc["source"] == "native"
    assert doc["ranks"] == [0]
    steps = doc["steps"]
    assert len(steps) >= 5
    for s in steps:
        assert sum(s[c] for c in STALL_COLUMNS) == s["step_ns"]
    full = [s for s in steps if s["compute_ns"] > 0]
    assert len(full) == 5
    for s in full:  # 2 ms forward (compute), 1 ms optimizer (host) per step
        assert s["compute_ns"] >= 2_000_000
        assert s["host_ns"] >= 1_000_000
        assert s["data_ns"] > 0  # each step starts by waiting for its batch
    assert doc["run"][0]["category"] == "compute"
    assert sum(r["total_ns"] for r in doc["run"]) == sum(s["step_ns"] for s in steps)
    assert {r["step"] for r in doc["across_ranks"]} == {s["step"] for s in steps}


def test_report_prints_tables(run_dir: Path) -> None:
    res = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert res.exit_code == 0, res.output
    for title in ("stalls per step and rank", "per step across ranks", "whole run"):
        assert title in res.output
    assert "compute" in res.output


def test_export_perfetto(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    res = CliRunner().invoke(cli, ["export", str(run_dir), "--perfetto", str(out)])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(out.read_bytes())
    assert any(e["name"] == "forward" for e in doc["traceEvents"])


def _fake_kineto_events() -> pl.DataFrame:
    rows = [
        {
            "rank": 0,
            "kind": "step",
            "category": "host",
            "name": "ProfilerStep#3",
            "start_ns": 0,
            "end_ns": 1000,
            "correlation": 3,
        },
        {
            "rank": 0,
            "kind": "kernel",
            "category": "compute",
            "name": "gemm",
            "start_ns": 100,
            "end_ns": 400,
            "device": 0,
            "lane": 7,
        },
        {
            "rank": 0,
            "kind": "memcpy",
            "category": "memcpy",
            "name": "Memcpy HtoD",
            "start_ns": 400,
            "end_ns": 500,
            "device": 0,
            "lane": 7,
        },
    ]
    return conform(pl.DataFrame(rows)).collect()


def test_report_kineto_folder_uses_the_importer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rank0.json").write_text("{}")
    seen: list[Path] = []

    def fake(path: Path) -> pl.DataFrame:
        seen.append(Path(path))
        return _fake_kineto_events()

    monkeypatch.setattr(stallscope, "import_kineto", fake, raising=False)
    res = CliRunner().invoke(cli, ["report", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    assert seen == [tmp_path]
    doc = orjson.loads(res.stdout)
    assert doc["source"] == "kineto"
    (s,) = doc["steps"]
    assert (s["step"], s["compute_ns"], s["memcpy_ns"], s["host_ns"]) == (3, 300, 100, 600)


def test_report_kineto_without_importer_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "trace.json.gz").write_bytes(b"")
    monkeypatch.delattr(stallscope, "import_kineto", raising=False)
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "trace.json.gz")])
    assert res.exit_code != 0
    assert "import_kineto" in res.output
    assert "Traceback" not in res.output


def test_report_on_a_folder_without_traces(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    res = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert res.exit_code != 0
    assert "neither a stallscope run directory" in res.output


def test_report_run_without_steps(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run), stallscope.region("work", category="compute"):
        pass
    # stop() records a closing step marker: at most one window, maybe empty of compute.
    res = CliRunner().invoke(cli, ["report", str(run), "--json"])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    for s in doc["steps"]:
        assert sum(s[c] for c in STALL_COLUMNS) == s["step_ns"]
