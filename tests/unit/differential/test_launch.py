"""What analyze does to the page cache before a run, and the environment a run gets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stallscope.data import _cache
from stallscope.differential import RunConfig
from stallscope.differential._launch import _env, prepare_cache
from stallscope.exceptions import AnalyzeError

COLD = RunConfig("cold", 2, 1, "real", "cold")
CACHED = RunConfig("cached", 2, 1, "real", "cached")


def _data(tmp: Path) -> Path:
    d = tmp / "ds"
    d.mkdir()
    for i in range(3):
        (d / f"{i}.bin").write_bytes(os.urandom(16 << 10))
    return d


def test_cached_reads_the_declared_files_and_cold_evicts_them(tmp_path: Path) -> None:
    d = _data(tmp_path)
    warm = prepare_cache(CACHED, [d], "fadvise")
    assert warm is not None and (warm.method, warm.files) == ("read", 3)
    cold = prepare_cache(COLD, [d], "fadvise")
    assert cold is not None and (cold.mode, cold.method, cold.bytes) == ("cold", "fadvise", 3 << 14)
    assert prepare_cache(RunConfig("synthetic", 2, 1, "synthetic"), [d], "auto") is None
    assert prepare_cache(COLD, [], "fadvise") is None  # nothing declared: the script's part


def test_drop_caches_syncs_and_writes_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    knob = tmp_path / "drop_caches"
    knob.write_text("")
    monkeypatch.setattr(_cache, "DROP_CACHES", knob)
    monkeypatch.setattr(_cache, "can_drop_caches", lambda: True)
    synced = []
    monkeypatch.setattr(os, "sync", lambda: synced.append(True))
    d = _data(tmp_path)
    for how in ("drop-caches", "auto"):
        knob.write_text("")
        action = prepare_cache(COLD, [d], how)
        assert action is not None and (action.method, action.files) == ("drop_caches", 3)
        assert knob.read_text() == "3\n"
    assert synced == [True, True]
    monkeypatch.setattr(_cache, "can_drop_caches", lambda: False)
    assert prepare_cache(COLD, [d], "auto").method == "fadvise"  # type: ignore[union-attr]
    with pytest.raises(AnalyzeError, match="unknown cold-cache method 'hot'"):
        prepare_cache(COLD, [d], "hot")


def test_run_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = _env(COLD, 23, [Path("/a"), Path("/b")], dropped=True)
    assert env == {
        "STALLSCOPE_DATA": "real",
        "STALLSCOPE_STEPS": "23",
        "STALLSCOPE_CACHE": "cold",
        "STALLSCOPE_DATASET": os.pathsep.join(["/a", "/b"]),
        "STALLSCOPE_CACHE_DROPPED": "drop_caches",
        "OMP_NUM_THREADS": "1",  # a device is a core
    }
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert _env(RunConfig("one", 1, 1, "synthetic"), 5, [], False) == {
        "STALLSCOPE_DATA": "synthetic",
        "STALLSCOPE_STEPS": "5",
        "OMP_NUM_THREADS": "4",
    }
