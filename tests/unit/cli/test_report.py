"""`stallscope report` and `stallscope export` on a real traced run, on Kineto traces (through
the importer, faked here) and on bad paths."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import click
import orjson
import polars as pl
import pytest
from click.testing import CliRunner

import stallscope
from stallscope._schema import conform
from stallscope.analysis import STALL_COLUMNS
from stallscope.cli.main import cli


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
    assert " events, 1 rank, " in res.output.splitlines()[0]  # counts read as English


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

    def fake(path: Path) -> stallscope.KinetoImport:
        seen.append(Path(path))
        return stallscope.KinetoImport(_fake_kineto_events(), {})

    monkeypatch.setattr(stallscope, "read_kineto", fake, raising=False)
    res = CliRunner().invoke(cli, ["report", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    assert seen == [tmp_path]
    doc = orjson.loads(res.stdout)
    assert doc["source"] == "kineto"
    (s,) = doc["steps"]
    assert (s["step"], s["compute_ns"], s["memcpy_ns"], s["host_ns"]) == (3, 300, 100, 600)


def test_report_on_an_empty_kineto_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "trace.json.gz").write_bytes(b"")
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "trace.json.gz")])
    assert res.exit_code != 0
    assert "trace.json.gz" in res.output
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


def _wide_events() -> pl.DataFrame:
    """Two ranks, one step of 123,456.789 ms on rank 1: numbers wider than a narrow column."""
    df = _fake_kineto_events()
    late = df.with_columns(
        pl.lit(1, dtype=df["rank"].dtype).alias("rank"),
        pl.col("end_ns").replace({1000: 123_456_789_012}),
    )
    return pl.concat([df, late])


def test_report_numbers_are_whole_in_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rank0.json").write_text("{}")
    monkeypatch.setattr(
        stallscope,
        "read_kineto",
        lambda p: stallscope.KinetoImport(_wide_events(), {}),
        raising=False,
    )
    res = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["report", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "…" not in res.output  # rich's mark of a cut cell
    # Rank 1's step: every digit, two decimals, in the per rank table and across ranks.
    assert res.output.count("123,456.79") >= 2
    assert "123,456.789" in res.output  # the whole-run table's three decimals
    # Headers wrap between words, never inside one.
    lines = res.output.splitlines()
    assert any(ln.split()[:3] == ["step", "ranks", "rank"] for ln in lines if ln.strip())
    assert any("slowest" in ln for ln in lines)
    assert all(len(ln) <= 80 for ln in lines[1:])  # the tables (line 1 names the tmp path)


def test_report_too_wide_for_the_terminal_wraps_rather_than_crops() -> None:
    from stallscope.cli.report import print_step_table

    cats = {c: [123_456_789_012, 1] for c in STALL_COLUMNS}
    table = pl.DataFrame(
        {"rank": [0, 1], "step": [3, 3], "step_ns": [123_456_789_012 * 9, 2], **cats}
    )
    runner = CliRunner(env={"COLUMNS": "80"})
    res = runner.invoke(
        click_command_calling(lambda: print_step_table(table)),
    )
    assert res.exit_code == 0, res.output
    # Every category's column is there, each number whole (the lines exceed 80 columns).
    header = next(ln for ln in res.output.splitlines() if ln.lstrip().startswith("rank"))
    for c in ("compute", "interconnect", "host"):
        assert c in header
    assert res.output.count("123,456.79") == len(STALL_COLUMNS)
    assert "1,111,111.10" in res.output


def click_command_calling(fn: Callable[[], None]) -> click.Command:
    return click.Command("t", callback=fn)


def test_export_shows_load_warnings_as_lines(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run), stallscope.region("work", category="compute"):
        pass
    meta = orjson.loads((run / "run.json").read_bytes())
    for proc in meta["processes"].values():
        proc["world_size"] = 2  # rank 1 never wrote an event file
    (run / "run.json").write_bytes(orjson.dumps(meta))
    res = CliRunner().invoke(cli, ["export", str(run), "--perfetto", str(tmp_path / "t.json")])
    assert res.exit_code == 0, res.output
    assert "warning: " in res.stderr and "rank 1" in res.stderr
    assert "StallscopeWarning" not in res.stderr  # not Python's warning format


DATA = Path(__file__).resolve().parents[2] / "data"
REFERENCE = DATA / "hta_reference"


def _kineto_set(name: str) -> Path:
    """A trace set of tests/data/kineto."""
    return DATA / "kineto" / name


def test_report_hta_json_gives_htas_numbers_on_real_traces() -> None:
    """`report --hta --json` on the DLRM 8-rank traces: the views carry HTA 0.5.0's own numbers
    (tests/data/hta_reference, µs there, ns here)."""
    res = CliRunner().invoke(
        cli, ["report", str(_kineto_set("param_dlrm_8rank")), "--hta", "--json"]
    )
    assert res.exit_code == 0, res.output
    hta = orjson.loads(res.stdout)["hta"]
    ref = orjson.loads((REFERENCE / "param_dlrm_8rank.json").read_bytes())
    got = {r["rank"]: r for r in hta["temporal_breakdown"]}
    assert sorted(got) == ref["ranks"]
    for r in ref["temporal_breakdown"]:
        assert got[r["rank"]]["kernel_time_ns"] == r["kernel_time(us)"] * 1000
        assert got[r["rank"]]["idle_pct"] == r["idle_time_pctg"]
    overlap = {r["rank"]: r["overlap_pct"] for r in hta["comm_comp_overlap"]}
    assert overlap == {r["rank"]: r["comp_comm_overlap_pctg"] for r in ref["comm_comp_overlap"]}
    idle = {(r["rank"], r["stream"], r["idle_category"]): r for r in hta["idle_time_breakdown"]}
    for r in ref["idle_time_breakdown"]:
        assert idle[(r["rank"], r["stream"], r["idle_category"])]["idle_time_ns"] == (
            r["idle_time"] * 1000
        )
    types = {r["kernel_type"]: r["time_ns"] for r in hta["kernel_type_breakdown"]}
    assert types == {r["kernel_type"]: r["sum"] * 1000 for r in ref["kernel_type_breakdown"]}


def test_report_hta_prints_the_views() -> None:
    path = _kineto_set("param_dlrm_8rank")
    res = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["report", str(path), "--hta"])
    assert res.exit_code == 0, res.output
    out = res.output
    for title in ("GPU time per rank", "GPU idle time by cause", "GPU kernel time by type"):
        assert title in out
    # Rank 0's kernel time (13,009 µs in HTA) and its idle share, as printed.
    row0 = next(ln.split() for ln in out.splitlines() if ln.split()[:2] == ["0", "13.009"])
    assert row0[2] == "49.3"
    assert "COMPUTATION overlapping COMMUNICATION" in out
    assert "…" not in out


def test_report_hta_on_a_run_without_gpu_kernels(run_dir: Path) -> None:
    res = CliRunner().invoke(cli, ["report", str(run_dir), "--hta"])
    assert res.exit_code == 0, res.output
    assert "no GPU kernels in this run" in res.output
    doc = orjson.loads(CliRunner().invoke(cli, ["report", str(run_dir), "--hta", "--json"]).stdout)
    assert doc["hta"]["temporal_breakdown"] == []


def test_report_says_how_steps_were_found_and_what_categories_mean(run_dir: Path) -> None:
    res = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert "steps: marked by the program (stallscope.step() or loader(mark_steps=True))" in (
        res.output
    )
    assert "what the categories mean" in res.output
    flat = " ".join(res.output.split())
    assert f"compute {stallscope.analysis.STALL_MEANINGS['compute']}" in flat
    doc = orjson.loads(CliRunner().invoke(cli, ["report", str(run_dir), "--json"]).stdout)
    assert doc["steps_found"] == [
        "marked by the program (stallscope.step() or loader(mark_steps=True))"
    ]


def test_report_on_part_of_a_jobs_traces_says_it_once(tmp_path: Path) -> None:
    from stallscope.io import _run_json as run_json

    run = tmp_path / "imported"
    with stallscope.trace(run, rank=0, world_size=16):
        for _ in stallscope.loader(range(2), mark_steps=True):
            time.sleep(0.001)
    # as `stallscope import` writes it: one rank's trace of a 16-rank job
    run_json.update_process(run, "rank-00000", {"source": "kineto", "step_source": None})
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {run}: 1 of 16 ranks' traces (rank 0): a PyTorch profiler trace set holding "
        "part of its job; the tables cover these ranks only"
    ]
    assert "ranks: 1 of 16 ranks' traces (rank 0)" in res.output


def test_report_says_why_compute_is_zero(tmp_path: Path) -> None:
    run = tmp_path / "markers-only"
    with stallscope.trace(run):
        for _ in stallscope.loader(range(3), mark_steps=True):
            time.sleep(0.002)  # work in no compute region
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.exit_code == 0, res.output
    assert "no compute: the run recorded no GPU kernels and no compute regions" in res.output
    assert "stallscope profile" in res.output
