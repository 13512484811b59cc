"""load() and scan() on broken run directories: a clear error naming the file and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stallscope
from stallscope import RunDirError


@pytest.fixture
def run(tmp_path: Path) -> Path:
    with stallscope.trace(tmp_path / "run"):
        for _ in range(100):
            stallscope.mark("m")
    return tmp_path / "run"


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"no such run directory.*out_dir"):
        stallscope.load(tmp_path / "nope")


def test_file_instead_of_directory(run: Path) -> None:
    with pytest.raises(RunDirError, match="not a directory"):
        stallscope.load(run / "run.json")


def test_empty_run(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"empty run.*was tracing started"):
        stallscope.load(tmp_path)


def test_empty_run_that_started_tracing(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path):
        pass  # nothing recorded
    with pytest.raises(RunDirError, match=r"run\.json lists processes"):
        stallscope.load(tmp_path)


def test_truncated_parquet_names_the_file(run: Path) -> None:
    f = run / "rank-00000.parquet"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(
        RunDirError, match=r"rank-00000\.parquet: truncated or not a Parquet file.*Move it aside"
    ):
        stallscope.load(run)


def test_garbage_parquet_names_the_file(run: Path) -> None:
    (run / "rank-00001.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(RunDirError, match=r"rank-00001\.parquet: truncated"):
        stallscope.scan(run)


def test_corrupt_run_json_names_the_file(run: Path) -> None:
    (run / "run.json").write_text('{"format": "stallscope-run", "processes": {')
    with pytest.raises(RunDirError, match=r"run\.json: corrupt run\.json.*delete run\.json"):
        stallscope.load(run)


def test_foreign_run_json(run: Path) -> None:
    (run / "run.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(RunDirError, match=r"not a stallscope run\.json"):
        stallscope.load(run)


def test_run_without_run_json_still_loads(run: Path) -> None:
    (run / "run.json").unlink()
    assert stallscope.load(run).height == 100


def test_missing_rank_is_reported(run: Path) -> None:
    doc = json.loads((run / "run.json").read_text())
    entry = dict(doc["processes"]["rank-00000"], rank=1, world_size=3, status="running")
    doc["processes"]["rank-00001"] = entry
    (run / "run.json").write_text(json.dumps(doc))
    for p in doc["processes"].values():
        p["world_size"] = 3
    (run / "run.json").write_text(json.dumps(doc))
    info = stallscope.run_info(run)
    assert info.world_size == 3 and info.ranks == [0] and info.missing_ranks == [1, 2]
    with pytest.warns(stallscope.StallscopeWarning) as seen:
        assert stallscope.load(run).height == 100
    said = [str(w.message) for w in seen]
    assert any("ranks 1-2: no event file" in m for m in said), said  # one line for both
    # rank 1's entry says it was still running: its trace never stopped
    assert any("rank-00001: trace never stopped" in m for m in said), said


def test_clock_offsets_are_applied(run: Path) -> None:
    raw = stallscope.load(run, align_clocks=False)
    doc = json.loads((run / "run.json").read_text())
    t0 = int(raw["start_ns"].min())  # type: ignore[arg-type]
    t1 = int(raw["start_ns"].max())  # type: ignore[arg-type]
    doc["processes"]["rank-00000"]["clock"]["offsets"] = [
        {"local_ns": t0, "offset_ns": 1000, "error_ns": 10},
        {"local_ns": t0 + 10**9, "offset_ns": 3000, "error_ns": 10},
    ]
    (run / "run.json").write_text(json.dumps(doc))
    got = stallscope.load(run)
    shift = (got["start_ns"] - raw["start_ns"]).to_list()
    expect = [1000 + round(2000 * (t - t0) / 1e9) for t in raw["start_ns"].to_list()]
    assert shift == expect
    assert (got["end_ns"] - got["start_ns"]).to_list() == (
        raw["end_ns"] - raw["start_ns"]
    ).to_list()
    assert t1 >= t0


def test_backend_drops_are_reported_with_the_core_drops(run: Path) -> None:
    doc = json.loads((run / "run.json").read_text())
    entry = doc["processes"]["rank-00000"]
    entry["drops"]["ring_full"] = 2
    entry["backends"] = {
        "cupti": {"drops": {"cupti_dropped": 5, "buffers_declined": 1}},
        "x": {"error": "e"},
    }
    (run / "run.json").write_text(json.dumps(doc))
    info = stallscope.run_info(run)
    assert info.drops == {"rank-00000": 8}
    assert info.drop_causes == {
        "rank-00000": {"ring_full": 2, "cupti.cupti_dropped": 5, "cupti.buffers_declined": 1}
    }
    # each counter named with what it means: a CUPTI drop is not a full ring
    (problem,) = info.problems
    assert "ring_full 2 (rings full: raise ring_capacity)" in problem
    assert "cupti.cupti_dropped 5 (records CUPTI itself counted" in problem
    assert "cupti.buffers_declined 1 (CUPTI's buffers reached pool_limit_bytes" in problem
    with pytest.warns(stallscope.StallscopeWarning, match="8 events dropped"):
        stallscope.load(run)
