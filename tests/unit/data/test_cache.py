"""The page cache of a dataset's files: residency (mincore), warming, evicting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stallscope.data import _cache
from stallscope.exceptions import DataError


def _files(tmp: Path, n: int = 8, size: int = 64 << 10) -> list[Path]:
    out = []
    (tmp / "sub").mkdir()
    for i in range(n):
        p = tmp / ("sub" if i % 2 else "") / f"f{i}.bin"
        p.write_bytes(os.urandom(size))
        out.append(p)
    return out


def _fs_type(path: Path) -> str:
    best, kind = "", ""
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if str(path).startswith(parts[1]) and len(parts[1]) > len(best):
            best, kind = parts[1], parts[2]
    return kind


def test_expand_walks_folders_sorts_and_dedupes(tmp_path: Path) -> None:
    files = _files(tmp_path, 4, 10)
    got = _cache.expand([tmp_path, files[0], tmp_path / "sub"])
    assert got == sorted(p.resolve() for p in files)


def test_expand_names_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"'.*nope' does not exist: declare the files"):
        _cache.expand([tmp_path / "nope"])


def test_evict_then_warm_moves_residency(tmp_path: Path) -> None:
    files = _cache.expand(_files(tmp_path))
    if _cache.resident_fraction(files) is None:
        pytest.skip("mincore is not available here: residency cannot be measured")
    if _fs_type(tmp_path) in ("tmpfs", "ramfs"):
        pytest.skip(f"{tmp_path} is on {_fs_type(tmp_path)}: its files live in memory")
    cold = _cache.evict(files)
    assert (cold.mode, cold.method, cold.files, cold.bytes) == ("cold", "fadvise", 8, 8 << 16)
    assert cold.resident_after is not None and cold.resident_after < 0.2
    warm = _cache.warm(files)
    assert (warm.mode, warm.method) == ("cached", "read")
    assert warm.resident_before is not None and warm.resident_before < 0.2
    assert warm.resident_after == 1.0
    assert "mode=cached;method=read;files=8;" in warm.detail()
    assert warm.detail().endswith("resident_after=1.0000")


def test_resident_fraction_of_nothing_is_none(tmp_path: Path) -> None:
    (tmp_path / "empty").write_bytes(b"")
    assert _cache.resident_fraction([tmp_path / "empty", tmp_path / "missing"]) is None


def test_drop_page_cache_without_root_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cache, "can_drop_caches", lambda: False)
    with pytest.raises(DataError, match=r"needs root .*posix_fadvise"):
        _cache.drop_page_cache()
