"""Continuous mode: the rolling window of full events, the per-step summary written as the
trace runs, the options."""

from __future__ import annotations

import json
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import stallscope
from stallscope.analysis import STALL_COLUMNS
from stallscope.capture._continuous import continuous_options
from stallscope.io._summary_files import read_rows

_COLS = ["rank", "step", "start_ns", "end_ns", "step_ns", *STALL_COLUMNS]


def _work(steps: int, sleep_s: float = 0.004) -> None:
    """Steps of a data wait, a compute region and host time."""
    fwd = stallscope.region("forward", category="compute")
    wait = stallscope.region("next_batch", category="data")
    for _ in range(steps):
        stallscope.step()
        with wait:
            time.sleep(sleep_s / 2)
        with fwd:
            time.sleep(sleep_s)
        time.sleep(sleep_s / 4)


def _entry(run: Path, stem: str = "rank-00000") -> dict[str, object]:
    doc = json.loads((run / "run.json").read_text())
    return doc["processes"][stem]  # type: ignore[no-any-return]


def test_window_of_steps_keeps_the_last_steps_and_deletes_older_parts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    opts = {"mode": "continuous", "window_steps": 5, "flush_interval": 0.05, "summary_lag_s": 0}
    with stallscope.trace(run, **opts) as t:
        assert t.mode == "continuous"
        _work(60)
        time.sleep(0.2)
        live = sorted(p.name for p in run.glob("rank-00000.part-*.parquet"))
        with pytest.warns(stallscope.StallscopeWarning, match="never stopped"):
            table = stallscope.stall_table(stallscope.load(run))
        # the parts on disk cover the last 5 steps, not the 60
        assert 5 <= table.height < 20
        assert table["step"].max() == 59  # the 60th is still open
        assert len(live) < 20
    entry = _entry(run)
    assert entry["mode"] == "continuous"
    cont = entry["continuous"]
    assert isinstance(cont, dict)
    w = cont["window"]
    assert w["parts_deleted"] > 2 and w["bytes_deleted"] > 0
    assert w["parts_kept"] >= 1 and w["peak_bytes_on_disk"] >= w["bytes_kept"]
    # the final file: what was in the window when the trace stopped (the last steps); every
    # event written is either in it or counted as deleted (60 steps of 2 regions, 61 markers)
    events = stallscope.load(run)
    assert entry["events_written"] == 181 == w["events_deleted"] + events.height
    final = stallscope.stall_table(events)
    assert 5 <= final.height < 20 and final["step"].max() == 60
    assert sorted(p.name for p in run.glob("*.parquet")) == ["rank-00000.parquet"]
    # every step made a summary row, though most of their events are gone
    s = stallscope.load_summary(run)
    assert s["step"].to_list() == list(range(1, 61))
    assert_frame_equal(s.filter(pl.col("step").is_in(final["step"].implode())).select(_COLS), final)
    assert cont["summary"]["rows"] == 60 and cont["summary"]["events_not_summarized"] == 0


def test_window_in_seconds_bounds_the_parts_on_disk(tmp_path: Path) -> None:
    run = tmp_path / "run"
    opts = {"mode": "continuous", "window_s": 0.3, "flush_interval": 0.05}
    with stallscope.trace(run, **opts):
        fwd = stallscope.region("f", category="compute")
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:
            stallscope.step()
            with fwd:
                time.sleep(0.002)
        with pytest.warns(stallscope.StallscopeWarning, match="never stopped"):
            ev = stallscope.load(run)
        span_s = (ev["end_ns"].max() - ev["start_ns"].min()) / 1e9  # type: ignore[operator]
        # what is on disk covers the window plus a few flushes (more when the machine is busy
        # and the flusher runs late), not the 1.5 s run
        assert 0.25 < span_s < 0.3 + 10 * 0.05
    w = _entry(run)["continuous"]["window"]  # type: ignore[index]
    assert w["window_s"] == 0.3 and w["parts_deleted"] > 5


def test_summary_rows_equal_the_stall_table_of_the_full_events(tmp_path: Path) -> None:
    run = tmp_path / "run"
    opts = {"mode": "continuous", "window_steps": 10_000, "flush_interval": 0.05}
    with stallscope.trace(run, **opts):
        _work(30)
        # rows appear while the trace runs, once a step ended and the lag passed
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and stallscope.load_summary(run).height < 20:
            time.sleep(0.05)
        assert stallscope.load_summary(run).height >= 20
    full = stallscope.stall_table(stallscope.load(run))
    s = stallscope.load_summary(run)
    assert full.height == 30 and s.height == 30
    assert_frame_equal(s.select(_COLS), full)
    assert (s["events"] >= 3).all() and (s["matched"]).all() and not s["straggler"].any()
    assert (s["compute_ns"] > 0).all() and (s["data_ns"] > 0).all()
    # after the stop every row is in Parquet: any Parquet engine reads the summary
    assert [p.suffix for p in (run / "summary").iterdir()] == [".parquet"]


def test_mode_from_the_environment_and_option_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STALLSCOPE_MODE", "continuous")
    monkeypatch.setenv("STALLSCOPE_WINDOW_STEPS", "7")
    monkeypatch.setenv("STALLSCOPE_CAPTURE_SIGNAL", "usr1")
    t = stallscope.trace(tmp_path)
    assert t.mode == "continuous" and t.continuous is not None
    assert t.continuous.window_steps == 7 and t.continuous.window_s is None
    assert t.continuous.capture_signal == 10  # SIGUSR1
    assert stallscope.trace(tmp_path, mode="full").continuous is None
    monkeypatch.setenv("STALLSCOPE_WINDOW_STEPS", "many")
    with pytest.raises(stallscope.TraceError, match="not a number"):
        stallscope.trace(tmp_path)
    monkeypatch.delenv("STALLSCOPE_WINDOW_STEPS")
    monkeypatch.delenv("STALLSCOPE_CAPTURE_SIGNAL")
    o = continuous_options(None, env={"STALLSCOPE_MODE": "continuous"}, flush_interval=0.5)
    assert o is not None and o.window_s == 60.0 and o.summary_lag_s == 1.0
    assert o.capture_signal == 12  # SIGUSR2


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"mode": "always"}, "mode='always'"),
        ({"mode": "full", "window_steps": 3}, "window_steps need mode='continuous'"),
        ({"mode": "continuous", "window_steps": 0}, "window_steps=0"),
        ({"mode": "continuous", "window_s": 0.0}, "window_s=0.0"),
        ({"mode": "continuous", "capture_signal": "SIGKILL"}, "cannot be used"),
        ({"mode": "continuous", "capture_signal": "SIGNOPE"}, "not a signal name"),
        ({"mode": "continuous", "capture_steps": 0}, "capture_steps=0"),
        ({"mode": "continuous", "summary_lag_s": -1}, "summary_lag_s=-1"),
    ],
)
def test_bad_continuous_options_are_trace_errors(
    tmp_path: Path, options: dict[str, object], match: str
) -> None:
    with pytest.raises(stallscope.TraceError, match=match):
        stallscope.trace(tmp_path, **options)  # type: ignore[arg-type]


def test_load_summary_of_a_full_trace_names_the_fix(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path):
        stallscope.step()
    with pytest.raises(stallscope.RunDirError, match="mode='continuous'"):
        stallscope.load_summary(tmp_path)
    with pytest.raises(stallscope.RunDirError, match="no such run directory"):
        stallscope.load_summary(tmp_path / "nope")


def test_summary_reader_skips_the_line_being_written_and_reports_bad_lines(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run, mode="continuous", flush_interval=0.05):
        _work(6)
    (pq,) = (run / "summary").glob("*.parquet")
    rows = pl.read_parquet(pq)
    # a live file: two whole rows, a cut-short one in the middle and one being appended
    lines = [json.dumps(r) for r in rows.head(2).to_dicts()]
    live = run / "summary" / "rank-00000.000001.jsonl"
    live.write_text(lines[0] + "\n" + '{"rank": 0, "ste' + "\n" + lines[1] + "\n" + lines[1][:30])
    got = read_rows(run)
    assert got.rows.height == rows.height + 2 and got.bad_lines == {live.name: 1}
    with pytest.warns(stallscope.StallscopeWarning, match="1 line"):
        s = stallscope.load_summary(run)
    assert s.height == rows.height + 2
    # the latest rows only
    assert read_rows(run, last_rows=2).rows.height == 2
