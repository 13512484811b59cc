"""`stallscope import` writes a native run directory that load() and the views read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import stallscope
from stallscope.analysis import temporal_breakdown
from stallscope.cli.main import cli


def test_import_writes_a_loadable_run(kineto_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = CliRunner().invoke(
        cli, ["import", str(kineto_data / "hta_sampled_2rank"), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "2 rank(s)" in res.output
    assert sorted(p.name for p in out.glob("rank-*.parquet")) == [
        "rank-00000.parquet",
        "rank-00001.parquet",
    ]
    doc = json.loads((out / "run.json").read_text())
    entry = doc["processes"]["rank-00001"]
    assert entry["source"] == "kineto"
    assert entry["world_size"] == 128
    assert entry["status"] == "stopped"
    # A sampled trace: 2 of 128 ranks, said once (not 126 missing ranks)
    with pytest.warns(stallscope.StallscopeWarning) as seen:
        loaded = stallscope.load(out)
    assert [str(w.message) for w in seen] == [
        f"{out}: 2 of 128 ranks' traces (ranks 0-1): a PyTorch profiler trace set holding part "
        "of its job; the tables cover these ranks only"
    ]
    direct = stallscope.import_kineto(kineto_data / "hta_sampled_2rank")
    assert loaded.height == direct.height
    assert temporal_breakdown(loaded).equals(temporal_breakdown(direct))


def test_import_errors_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    res = CliRunner().invoke(cli, ["import", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code != 0
    assert "not valid JSON" in res.output
    assert not (tmp_path / "o").exists()
