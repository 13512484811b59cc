"""stallscope.data.loader: a DataLoader whose workers' fetch and prep times reach the main
process's trace (workers are forked processes that record nothing themselves), so that the
stall table splits the data wait into data_fetch and data_prep."""

from __future__ import annotations

import os
import time
from pathlib import Path

import polars as pl
import pytest

import stallscope
import stallscope.data as sd

pytestmark = pytest.mark.torch
pytest.importorskip("PIL", reason="the image dataset needs Pillow (the data extra)")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sd.write_images(tmp_path_factory.mktemp("img") / "d", 96, side=48)


@pytest.mark.parametrize("workers", [0, 1])
def test_worker_times_reach_the_trace_and_split_the_wait(
    images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setenv(sd.DATA_ENV, "real")
    for v in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(v, raising=False)
    ds = sd.ImageFiles(images, crop=24)
    dl = sd.loader(ds, 16, workers=workers)
    assert len(dl) == 6 and dl.batch_size == 16 and dl.dataset is ds
    with stallscope.trace(tmp_path):
        for x, y in sd.synthetic(dl):
            assert tuple(x.shape) == (16, 3, 24, 24) and tuple(y.shape) == (16,)
            with stallscope.region("compute", "compute"):
                time.sleep(0.002)
    ev = stallscope.load(tmp_path)
    names = ev.group_by("name").len()
    count = dict(zip(names["name"], names["len"], strict=True))
    assert count["worker_fetch"] == 96 and count["worker_prep"] == 96 + 6  # + 6 collations
    lanes = set(ev.filter(pl.col("name") == "worker_fetch")["lane"])
    main_lane = ev.filter(pl.col("kind") == "data_wait")["lane"].unique().to_list()
    if workers:
        assert len(lanes) == 1 and lanes != {os.getpid()}  # the worker process
    else:
        assert lanes == {os.getpid()}
    split = ev.filter(pl.col("name").is_in(["loader_fetch", "loader_prep"]))
    assert split.height > 0 and split["lane"].unique().to_list() == main_lane
    table = stallscope.stall_table(ev)
    fetch, prep = int(table["data_fetch_ns"].sum()), int(table["data_prep_ns"].sum())
    assert fetch > 0 and prep > 0
    waits = ev.filter(pl.col("kind") == "data_wait")
    wait_ns = int((waits["end_ns"] - waits["start_ns"]).sum())
    assert fetch + prep + int(table["data_ns"].sum()) <= wait_ns  # within the waits only


def test_ranks_read_their_own_shard(images: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = sd.ImageFiles(images, crop=8)
    seen = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        dl = sd.loader(ds, 8, workers=0)
        assert len(dl) == 6  # 96 images / 2 ranks / 8 per batch
        seen.append({int(i) for i in dl.sampler})
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == 96
