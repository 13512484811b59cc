"""`stallscope top`, `stallscope capture` and `stallscope report` on continuous traces."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import stallscope
from stallscope.cli.main import cli
from stallscope.cli.top import top_view


def _steps(n: int) -> None:
    fwd = stallscope.region("forward", category="compute")
    wait = stallscope.region("next_batch", category="data")
    for _ in range(n):
        stallscope.step()
        with wait:
            time.sleep(0.001)
        with fwd:
            time.sleep(0.003)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("continuous") / "run"
    with stallscope.trace(run, mode="continuous", window_steps=3, flush_interval=0.05):
        _steps(40)
    return run


def test_top_once_shows_rate_shares_and_slowest_rank(run_dir: Path) -> None:
    res = CliRunner().invoke(cli, ["top", str(run_dir), "--once", "--steps", "10"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "1 rank(s) | latest step 40 |" in out and "steps/s" in out
    assert "compute " in out and "data " in out and "slowest rank: 0" in out
    view = top_view(stallscope.load_summary(run_dir), 10)
    assert view["ranks"] == 1 and view["latest_step"] == 40
    assert 20 < view["steps_per_s"] < 300  # ~4 ms per step, slower on a busy machine
    assert abs(sum(v for k, v in view["shares"].items() if k in (
        "compute", "memcpy", "comm", "data", "host")) - 1) < 1e-9  # fmt: skip


def test_top_of_a_run_without_summary_names_the_fix(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path):
        _steps(2)
    res = CliRunner().invoke(cli, ["top", str(tmp_path), "--once"])
    assert res.exit_code != 0 and "mode='continuous'" in res.output


def test_report_adds_the_summary_and_reads_it_alone(run_dir: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert "continuous summary: 40 rank-steps, steps 1..40" in res.output
    doc = orjson.loads(CliRunner().invoke(cli, ["report", str(run_dir), "--json"]).stdout)
    # the window (3 steps) plus what the last flush intervals held
    assert len(doc["summary"]["steps"]) == 40 and 3 <= len(doc["steps"]) < 40
    # the event files gone: the tables come from the summary
    bare = tmp_path / "bare"
    (bare / "summary").mkdir(parents=True)
    for p in (run_dir / "summary").iterdir():
        (bare / "summary" / p.name).write_bytes(p.read_bytes())
    (bare / "run.json").write_bytes((run_dir / "run.json").read_bytes())
    res = CliRunner().invoke(cli, ["report", str(bare)])
    assert res.exit_code == 0, res.output
    assert "per-step summary of a continuous trace" in res.output
    assert "stalls per step and rank" in res.output and "whole run" in res.output
    doc = orjson.loads(CliRunner().invoke(cli, ["report", str(bare), "--json"]).stdout)
    assert doc["source"] == "summary" and len(doc["steps"]) == 40


def test_html_report_of_a_continuous_trace(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the HTML report's plots need matplotlib")
    page = tmp_path / "full.html"
    res = CliRunner().invoke(cli, ["report", str(run_dir), "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert "its per-step summary holds 40 rank-steps, steps 1..40" in page.read_text()
    # the event files gone: the stall bars come from the summary; the timeline says why not
    bare = tmp_path / "bare"
    (bare / "summary").mkdir(parents=True)
    for p in (run_dir / "summary").iterdir():
        (bare / "summary" / p.name).write_bytes(p.read_bytes())
    page = tmp_path / "bare.html"
    res = CliRunner().invoke(cli, ["report", str(bare), "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert f"HTML report: {page}" in res.output
    text = page.read_text()
    assert "1 rank ran 40 steps" in text and "per-step summary of a continuous trace" in text
    assert "<svg" in text and "no step intervals were given" in text


def test_capture_needs_a_running_continuous_trace(run_dir: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["capture", str(run_dir), "--steps", "3"])
    assert res.exit_code != 0 and "no traced process is running" in res.output
    done = threading.Event()
    run = tmp_path / "full"
    with stallscope.trace(run):
        res = CliRunner().invoke(cli, ["capture", str(run), "--steps", "3"])
        done.set()
    assert res.exit_code != 0 and "mode 'full'" in res.output


def test_capture_of_a_running_trace_waits_for_every_rank(tmp_path: Path) -> None:
    run = tmp_path / "run"
    stop = threading.Event()
    result: list[object] = []

    def ask() -> None:
        time.sleep(0.5)
        result.append(CliRunner().invoke(
            cli, ["capture", str(run), "--steps", "4", "--id", "c1", "--wait", "20"]))  # fmt: skip
        stop.set()

    helper = threading.Thread(target=ask)
    with stallscope.trace(run, mode="continuous", window_steps=3, flush_interval=0.05):
        helper.start()
        fwd = stallscope.region("forward", category="compute")
        deadline = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < deadline:
            stallscope.step()
            with fwd:
                time.sleep(0.005)
    helper.join()
    res = result[0]
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert "capture c1: done, 1 rank(s)" in res.output  # type: ignore[attr-defined]
    table = stallscope.stall_table(run / "captures" / "c1")
    assert table.height == 4


def _windowed_copy(run_dir: Path, dst: Path) -> Path:
    """A summary-only copy of `run_dir` whose even steps lie outside device windows (as a
    trace with device_every=2 writes them: null device columns, device false)."""
    import polars as pl

    from stallscope.io._summary_files import DEVICE_COLUMNS, read_rows, summary_dir

    rows = read_rows(run_dir).rows
    off = (pl.col("step") % 2 == 0) & ~pl.col("arrivals_only")
    rows = rows.with_columns(
        *(pl.when(off).then(None).otherwise(pl.col(c)).alias(c) for c in DEVICE_COLUMNS),
        device=~off,
    )
    summary_dir(dst).mkdir(parents=True)
    rows.write_parquet(summary_dir(dst) / "rank-00000.000000.parquet")
    return dst


def test_top_and_report_take_shares_from_steps_with_device_events(
    run_dir: Path, tmp_path: Path
) -> None:
    run = _windowed_copy(run_dir, tmp_path / "windowed")
    rows = stallscope.load_summary(run)
    assert rows.filter(~rows["device"])["compute_ns"].null_count() == 20
    view = top_view(rows, 10)
    assert (view["device_steps"], view["rank_steps"]) == (5, 10)
    on = rows.filter(rows["device"]).tail(5)
    assert view["shares"]["compute"] == pytest.approx(
        int(on["compute_ns"].sum()) / int(on["step_ns"].sum())
    )
    res = CliRunner().invoke(cli, ["top", str(run), "--once", "--steps", "10"])
    assert res.exit_code == 0, res.output
    assert "device events in 5 of 10 rank-steps" in res.output
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.exit_code == 0, res.output
    assert "(shares of the 20 of 40 rank-steps with device events)" in res.output
    html = tmp_path / "report.html"
    res = CliRunner().invoke(cli, ["report", str(run), "--html", str(html)])
    assert res.exit_code == 0, res.output
    assert "device events in 20 of 40 rank-steps" in html.read_text()
