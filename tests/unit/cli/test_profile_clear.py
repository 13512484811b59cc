"""What `stallscope profile --overwrite` counts as an earlier run and removes: the event files,
run.json and a continuous trace's summary/, captures/ and capture.trigger; nothing else."""

from __future__ import annotations

import time
from pathlib import Path

import stallscope
from stallscope.cli.profile import clear_run, earlier_run


def test_a_continuous_runs_files_are_an_earlier_run_and_go(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run, mode="continuous", window_steps=2, flush_interval=0.05):
        for _ in range(5):
            stallscope.step()
            time.sleep(0.002)
    (run / "captures" / "c1").mkdir(parents=True)
    (run / "capture.trigger").write_text("steps=2\n")
    (run / "notes.txt").write_text("the user's own file")
    said = earlier_run(run)
    assert said is not None and said.startswith("rank-00000")
    assert "more" in said  # run.json, summary/, captures/, capture.trigger
    gone = {p.name for p in clear_run(run)}
    assert {"run.json", "summary", "captures", "capture.trigger"} <= gone
    # run.json's lock file stays: the ranks of the next run lock it to write run.json
    assert sorted(p.name for p in run.iterdir()) == [".run.json.lock", "notes.txt"]
    assert earlier_run(run) is None


def test_an_empty_or_missing_folder_holds_no_run(tmp_path: Path) -> None:
    assert earlier_run(tmp_path / "missing") is None
    assert earlier_run(tmp_path) is None
    assert clear_run(tmp_path / "missing") == []
