"""The recording calls users write: region (context manager, decorator, nesting, threads),
step, mark, counter, loader."""

from __future__ import annotations

import threading
from pathlib import Path

import polars as pl
import pytest

import stallscope


def _load(path: Path) -> pl.DataFrame:
    return stallscope.load(path).sort("start_ns")


def test_region_records_interval_with_category(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path), stallscope.region("fwd", category="compute") as r:
        assert r.name == "fwd" and r.category == "compute"
    (row,) = _load(tmp_path).to_dicts()
    assert (row["kind"], row["category"], row["name"]) == ("region", "compute", "fwd")
    assert row["end_ns"] >= row["start_ns"] and row["device"] == -1 and row["lane"] > 0


def test_region_as_decorator_keeps_function_identity(tmp_path: Path) -> None:
    @stallscope.region("opt", category="compute")
    def optimizer_step(x: int) -> int:
        """doc"""
        return x + 1

    with stallscope.trace(tmp_path):
        assert optimizer_step(1) == 2
        assert optimizer_step(2) == 3
    assert optimizer_step.__name__ == "optimizer_step" and optimizer_step.__doc__ == "doc"
    assert _load(tmp_path)["name"].to_list() == ["opt", "opt"]


def test_nested_and_reused_regions_pair_correctly(tmp_path: Path) -> None:
    outer, inner = stallscope.region("outer"), stallscope.region("inner")
    with stallscope.trace(tmp_path), outer, inner, inner:  # the same object re-entered
        pass
    ev = _load(tmp_path)
    spans = {(r["name"], r["start_ns"], r["end_ns"]) for r in ev.to_dicts()}
    o = next(s for s in spans if s[0] == "outer")
    inners = sorted(s for s in spans if s[0] == "inner")
    assert len(inners) == 2
    assert all(o[1] <= s[1] <= s[2] <= o[2] for s in inners)
    assert inners[0][1] <= inners[1][1] and inners[1][2] <= inners[0][2]  # properly nested


def test_region_exit_on_exception_still_records(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path), pytest.raises(KeyError), stallscope.region("boom"):
        raise KeyError("x")
    assert _load(tmp_path)["name"].to_list() == ["boom"]


def test_regions_from_threads_land_on_their_own_lanes(tmp_path: Path) -> None:
    r = stallscope.region("work", category="compute")

    def worker() -> None:
        for _ in range(100):
            with r:
                pass

    with stallscope.trace(tmp_path):
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ev = _load(tmp_path)
    assert ev.height == 400
    assert ev.group_by("lane").len()["len"].sort().to_list() == [100] * 4


def test_bad_category_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown category 'gpu'.*data_fetch"):
        stallscope.region("x", category="gpu")
    with pytest.raises(TypeError):
        stallscope.region(123)  # type: ignore[arg-type]


def test_step_mark_counter(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path):
        assert stallscope.step() == 1
        stallscope.mark("checkpoint")
        stallscope.counter("loss", 0.25)
        assert stallscope.step() == 2
    ev = _load(tmp_path)
    steps = ev.filter(pl.col("kind") == "step")
    assert steps["correlation"].to_list() == [1, 2, 3]  # 3 = the closing marker of stop()
    c = ev.filter(pl.col("kind") == "counter").row(0, named=True)
    assert c["name"] == "loss" and c["value"] == 0.25 and c["bytes"] == 0
    assert ev.filter(pl.col("kind") == "mark")["name"].to_list() == ["checkpoint"]
    with pytest.raises(TypeError):
        stallscope.counter("loss", "high")  # type: ignore[arg-type]


def test_calls_outside_a_trace_are_harmless() -> None:
    with stallscope.region("x"):
        stallscope.mark("y")
        stallscope.counter("z", 1.0)
    assert not stallscope._core.recording()


def test_loader_records_each_wait_and_marks_steps(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path):
        got = list(stallscope.loader(range(5), mark_steps=True))
    assert got == [0, 1, 2, 3, 4]
    ev = _load(tmp_path)
    waits = ev.filter(pl.col("kind") == "data_wait")
    assert waits.height == 6 and set(waits["category"].to_list()) == {
        "data"
    }  # 5 items + the final StopIteration
    windows = stallscope.analysis.step_windows(ev)
    assert windows["step"].to_list() == [1, 2, 3, 4, 5]
    # each step window opens with its batch wait
    for w, d in zip(
        windows.iter_rows(named=True), waits.head(5).iter_rows(named=True), strict=True
    ):
        assert w["start_ns"] <= d["start_ns"] <= d["end_ns"] <= w["end_ns"]


def test_loader_ends_the_last_step_before_its_teardown(tmp_path: Path) -> None:
    import time

    class Slow:
        """An iterable whose iterator takes 50 ms to shut down (a DataLoader joining workers)."""

        def __iter__(self):  # type: ignore[no-untyped-def]
            try:
                yield from range(10)
            finally:
                time.sleep(0.05)

    with stallscope.trace(tmp_path):
        for i, _ in enumerate(stallscope.loader(Slow(), mark_steps=True)):
            time.sleep(0.001)
            if i == 2:
                break  # the loader is closed here, its teardown follows
        time.sleep(0.05)  # more work before stop: in no step either
    windows = stallscope.analysis.step_windows(_load(tmp_path))
    assert windows["step"].to_list() == [1, 2, 3]
    assert (windows["step_ns"] < 30_000_000).all(), windows


def test_loader_ends_the_last_step_where_the_data_ends(tmp_path: Path) -> None:
    import time

    with stallscope.trace(tmp_path):
        for _ in stallscope.loader(range(3), mark_steps=True):
            time.sleep(0.001)
        time.sleep(0.05)
    ev = _load(tmp_path)
    windows = stallscope.analysis.step_windows(ev)
    last_wait = ev.filter(pl.col("kind") == "data_wait")["start_ns"].max()
    # The wait that found no batch ends it (the step ends as the wait's region is entered)
    assert 0 <= last_wait - windows["end_ns"].max() < 1_000_000
    assert (windows["step_ns"] < 30_000_000).all(), windows
