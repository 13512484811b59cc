"""Trace start/stop, files written, run.json, options, misuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stallscope
from stallscope import _core


def test_trace_writes_one_file_and_run_json(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path, rank=3, world_size=4, local_rank=1) as t:
        assert t.recording and stallscope.active() is t
        r = stallscope.region("work", category="compute")
        for _ in range(3):
            stallscope.step()
            with r:
                pass
    assert not t.recording and stallscope.active() is None
    assert t.path == tmp_path / "rank-00003.parquet"
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == ["rank-00003.parquet"]
    doc = json.loads((tmp_path / "run.json").read_text())
    entry = doc["processes"]["rank-00003"]
    assert entry["status"] == "stopped"
    assert (entry["rank"], entry["world_size"], entry["local_rank"]) == (3, 4, 1)
    assert entry["events_written"] == 3 + 3 + 1  # steps, regions, closing step marker
    assert entry["drops"] == {"ring_full": 0, "no_thread_slot": 0, "nesting_too_deep": 0}
    assert entry["start_clock"]["monotonic_ns"] < entry["stop_clock"]["monotonic_ns"]
    assert entry["threads"] and all(th["dropped"] == 0 for th in entry["threads"])


def test_rank_from_torchrun_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with stallscope.trace(tmp_path) as t:
        stallscope.mark("x")
    assert t.placement.rank == 1 and t.placement.world_size == 2
    assert (tmp_path / "rank-00001.parquet").exists()


def test_start_stop_functions_and_idempotent_stop(tmp_path: Path) -> None:
    t = stallscope.start(tmp_path)
    stallscope.mark("m")
    p = stallscope.stop()
    assert p == t.path and t.stop() == p
    assert stallscope.stop() is None


def test_second_concurrent_trace_is_refused(tmp_path: Path) -> None:
    with (
        stallscope.trace(tmp_path / "a"),
        pytest.raises(stallscope.TraceError, match="already recording"),
    ):
        stallscope.trace(tmp_path / "b").start()


def test_existing_rank_file_needs_overwrite(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path):
        stallscope.mark("m")
    with pytest.raises(stallscope.TraceError, match="overwrite=True"):
        stallscope.trace(tmp_path).start()
    with stallscope.trace(tmp_path, overwrite=True):
        stallscope.mark("m2")
    assert stallscope.load(tmp_path)["name"].to_list() == ["m2"]


@pytest.mark.parametrize(
    ("option", "match"),
    [
        ({"flush_interval": 0}, "flush_interval"),
        ({"ring_capacity": 3}, "ring_capacity"),
        ({"max_threads": 0}, "max_threads"),
        ({"rank": 5, "world_size": 2}, "rank 5"),
        ({"backends": ["no-such-backend"]}, "unknown backend"),
    ],
)
def test_bad_options_name_the_problem(
    tmp_path: Path, option: dict[str, object], match: str
) -> None:
    with pytest.raises(stallscope.TraceError, match=match):
        stallscope.trace(tmp_path, **option)  # type: ignore[arg-type]


def test_pool_exhaustion_is_counted_not_silent(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path, max_threads=2) as t:
        # The pool may already be larger from an earlier trace: fill every free slot.
        _core.stress_record(_core.max_threads() + 3, 10)
    doc = json.loads((tmp_path / "run.json").read_text())
    drops = doc["processes"]["rank-00000"]["drops"]
    recorded = sum(th["recorded"] for th in doc["processes"]["rank-00000"]["threads"])
    assert drops["no_thread_slot"] > 0
    assert recorded + drops["no_thread_slot"] == (_core.max_threads() + 3) * 10
    assert t.events_written == recorded


def test_the_last_step_ends_before_the_backends_stop_work(tmp_path: Path) -> None:
    import time

    class SlowStop:
        """A capture backend whose stop takes 50 ms (the clock sample at stop waits for every
        rank)."""

        name = "slow_stop"

        def on_start(self, trace: object) -> None:
            return None

        def on_stop(self, trace: object) -> None:
            time.sleep(0.05)

    t = stallscope.trace(tmp_path)
    t._backends.append(SlowStop())
    with t:
        for _ in range(2):
            stallscope.step()
            time.sleep(0.001)
    windows = stallscope.analysis.step_windows(stallscope.load(tmp_path))
    assert windows["step"].to_list() == [1, 2]
    assert windows["step_ns"].max() < 30_000_000, windows
    entry = json.loads((tmp_path / "run.json").read_text())["processes"]["rank-00000"]
    assert entry["step_source"] == {"source": "stallscope.step"}


def test_end_steps_leaves_teardown_out(tmp_path: Path) -> None:
    import time

    with stallscope.trace(tmp_path) as t:
        stallscope.step()
        time.sleep(0.001)
        t.end_steps(_core.now_ns())
        time.sleep(0.03)  # teardown
    windows = stallscope.analysis.step_windows(stallscope.load(tmp_path))
    assert windows.height == 1 and windows["step_ns"][0] < 20_000_000


def test_device_backends_stop_inside_the_last_step(tmp_path: Path) -> None:
    import time

    order: list[str] = []

    class Backend:
        def __init__(self, name: str, device: bool) -> None:
            self.name, self.device = name, device

        def on_start(self, trace: object) -> None:
            return None

        def on_stop(self, trace: object) -> None:
            order.append(self.name)
            time.sleep(0.03)

    t = stallscope.trace(tmp_path)
    t._backends += [Backend("clock", False), Backend("gpu", True)]
    with t:
        stallscope.step()
        began = _core.now_ns()
    windows = stallscope.analysis.step_windows(stallscope.load(tmp_path))
    assert order == ["gpu", "clock"]  # the device's records first
    # the last step holds the device backend's flush (30 ms), not the other's stop work
    assert 25_000_000 < windows["end_ns"][0] - began < 55_000_000, windows
