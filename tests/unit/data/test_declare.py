"""stallscope.data.dataset_files: the script names its files; cached and cold runs prepare the
page cache and say what they did in a trace mark."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

import stallscope
import stallscope.data as sd
from stallscope._schema import detail_value
from stallscope.data import _cache


def cache_marks(ev: pl.DataFrame) -> pl.DataFrame:
    """The cache marks' details as columns (numbers as text)."""
    rows = ev.filter(pl.col("name") == sd.CACHE_MARK)["detail"].to_list()
    keys = ("mode", "method", "files", "bytes", "resident_before", "resident_after")
    return pl.DataFrame(
        [{k: detail_value(d, k) for k in keys} for d in rows],
        schema=dict.fromkeys(keys, pl.String),
    )


def _data(tmp: Path) -> Path:
    d = tmp / "ds"
    d.mkdir()
    for i in range(4):
        (d / f"{i}.bin").write_bytes(os.urandom(32 << 10))
    return d


def test_without_a_cache_mode_only_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sd.CACHE_ENV, raising=False)
    extra = tmp_path / "extra.bin"
    extra.write_bytes(b"x")
    monkeypatch.setenv(sd.DATASET_ENV, str(extra))
    d = _data(tmp_path)
    with stallscope.trace(tmp_path / "run"):
        files = sd.dataset_files(d)
        stallscope.mark("end")  # a run needs one event to be loaded
    assert len(files) == 5 and extra.resolve() in files
    assert cache_marks(stallscope.load(tmp_path / "run")).height == 0


@pytest.mark.parametrize("mode", ["cold", "cached"])
def test_cache_modes_act_and_record_a_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.delenv(sd.DATASET_ENV, raising=False)
    monkeypatch.setenv(sd.CACHE_ENV, mode)
    d = _data(tmp_path)
    with stallscope.trace(tmp_path / "run"):
        sd.dataset_files(d)
    ev = stallscope.load(tmp_path / "run")
    (m,) = cache_marks(ev).to_dicts()
    assert (m["mode"], m["files"], m["bytes"]) == (mode, "4", str(4 * (32 << 10)))
    assert m["method"] == ("read" if mode == "cached" else "fadvise")
    (row,) = ev.filter(pl.col("name") == sd.CACHE_MARK).to_dicts()
    assert row["bytes"] == 4 * (32 << 10)
    if _cache.resident_fraction(list(d.iterdir())) is not None:  # mincore works here
        assert m["resident_after"] and m["resident_before"]
        if mode == "cached":
            assert m["resident_after"] == "1.0000"


def test_cold_after_analyze_dropped_the_cache_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sd.CACHE_ENV, "cold")
    monkeypatch.setenv("STALLSCOPE_CACHE_DROPPED", "drop_caches")
    with stallscope.trace(tmp_path / "run"):
        sd.dataset_files(_data(tmp_path))
    assert cache_marks(stallscope.load(tmp_path / "run"))["method"].to_list() == ["drop_caches"]
