"""Fetch and prep intervals noted where samples load, carried with the batch, recorded in the
main process: the worker's own lane, and the part inside the main thread's wait."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl

import stallscope
from stallscope.data import _timing


def test_collate_takes_the_intervals_noted_since_the_last_batch() -> None:
    _timing._pending.clear()
    _timing.fetched(10, 20, 100)
    _timing.prepared(20, 35)
    _timing.fetched(35, 40, 50)
    _timing.prepared(40, 60)
    tb = _timing.TimedCollate(lambda samples: sum(samples))([1, 2, 3])
    assert tb.batch == 6 and tb.pid == os.getpid() and tb.nbytes == 150
    assert tb.fetch.tolist() == [[10, 20, 100], [35, 40, 50]]
    assert tb.prep.tolist()[:2] == [[20, 35], [40, 60]]
    (collate,) = tb.prep.tolist()[2:]  # the collation, timed now
    assert 0 < collate[0] <= collate[1] <= stallscope.now_ns()
    empty = _timing.TimedCollate(list)([])
    assert empty.fetch.shape == (0, 3) and empty.prep.shape == (1, 2)


def test_clip_keeps_the_parts_inside() -> None:
    rows = np.array([[0, 10, 1], [12, 20, 1], [25, 40, 1], [45, 50, 1]])
    assert _timing.clip(rows, 5, 30).tolist() == [[5, 10], [12, 20], [25, 30]]
    assert _timing.clip(rows, 30, 30).shape == (0, 2)


def test_record_splits_only_the_wait(tmp_path: Path) -> None:
    t = stallscope.now_ns()
    fetch = np.array([[t, t + 100, 7], [t + 300, t + 400, 9]], dtype=np.int64)
    prep = np.array([[t + 100, t + 300], [t + 400, t + 600]], dtype=np.int64)
    timed = _timing.TimedBatch(None, fetch, prep, pid=4242)
    with stallscope.trace(tmp_path):
        _timing.record(timed, t + 250, t + 500)  # the main thread waited from 250 to 500
    ev = stallscope.load(tmp_path).with_columns(s=pl.col("start_ns") - t, e=pl.col("end_ns") - t)
    worker = ev.filter(pl.col("name").str.starts_with("worker_"))
    assert set(worker["lane"]) == {4242} and set(worker["category"]) == {"other"}
    assert worker.filter(pl.col("name") == "worker_fetch")["bytes"].to_list() == [7, 9]
    main = ev.filter(pl.col("name").str.starts_with("loader_")).sort("s")
    assert main.select("name", "category", "s", "e").rows() == [
        ("loader_prep", "data_prep", 250, 300),
        ("loader_fetch", "data_fetch", 300, 400),
        ("loader_prep", "data_prep", 400, 500),
    ]
    assert set(main["lane"]) != {4242}


def test_record_without_a_trace_does_nothing() -> None:
    timed = _timing.TimedBatch(None, np.zeros((1, 3), np.int64), np.zeros((1, 2), np.int64), 1)
    _timing.record(timed, 0, 10)  # no trace: no error
