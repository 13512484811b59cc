"""The page cache of a dataset's files: how much of it is resident (mincore), reading it in
(a cached run), evicting it (posix_fadvise DONTNEED, a cold run), or dropping the whole page
cache as root (/proc/sys/vm/drop_caches)."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from stallscope.exceptions import DataError

DROP_CACHES: Final = Path("/proc/sys/vm/drop_caches")
_CHUNK: Final = 1 << 20  # bytes read at a time when warming


@dataclass(frozen=True)
class CacheAction:
    """What was done to the page cache before a run, and its effect on the dataset's files.

    method: ``read`` (cached run: every file read through), ``fadvise`` (cold run:
    posix_fadvise DONTNEED per file, after flushing its dirty pages), ``drop_caches`` (cold
    run, as root: the whole page cache dropped), ``none``. resident_before / resident_after:
    the fraction of the files' pages in the page cache (mincore), None where it cannot be
    measured."""

    mode: str
    method: str
    files: int
    bytes: int
    resident_before: float | None
    resident_after: float | None

    def detail(self) -> str:
        """``key=value;...`` for a trace mark (see stallscope._schema.format_detail)."""

        def frac(v: float | None) -> str:
            return "" if v is None else f"{v:.4f}"

        return (
            f"mode={self.mode};method={self.method};files={self.files};bytes={self.bytes};"
            f"resident_before={frac(self.resident_before)};"
            f"resident_after={frac(self.resident_after)}"
        )


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every regular file under `paths` (files as given, folders walked), sorted, once each.
    A path that does not exist raises DataError."""
    out: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file():
            out.add(p.resolve())
        elif p.is_dir():
            out.update(f.resolve() for f in p.rglob("*") if f.is_file())
        else:
            raise DataError(
                f"dataset path {str(p)!r} does not exist: declare the files (or folders) "
                "the training script reads"
            )
    return sorted(out)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.mmap.restype = ctypes.c_void_p
    lib.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    return lib


_LIBC: Final = _libc()
_MAP_FAILED: Final = ctypes.c_void_p(-1).value


def resident_fraction(files: Iterable[Path]) -> float | None:
    """The fraction of the files' pages that are in the page cache now (mincore(2) on a
    read-only mapping; mapping a file does not read it). None where mincore is unavailable."""
    if _LIBC is None or not hasattr(_LIBC, "mincore"):
        return None
    page = mmap.PAGESIZE
    total = resident = 0
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                continue
            pages = (size + page - 1) // page
            addr = _LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr is None or addr == _MAP_FAILED:
                return None
            try:
                vec = ctypes.create_string_buffer(pages)
                if _LIBC.mincore(addr, size, vec) != 0:
                    return None
                resident += sum(b & 1 for b in vec.raw)
                total += pages
            finally:
                _LIBC.munmap(addr, size)
        finally:
            os.close(fd)
    return resident / total if total else None


def _size(files: list[Path]) -> int:
    return sum(f.stat().st_size for f in files)


def warm(files: list[Path]) -> CacheAction:
    """Read every file through once, so that a cached run finds all of it in memory."""
    before = resident_fraction(files)
    buf = bytearray(_CHUNK)
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass
    return CacheAction("cached", "read", len(files), _size(files), before, resident_fraction(files))


def evict(files: list[Path], method: str = "fadvise") -> CacheAction:
    """Evict the files from the page cache: flush each one's dirty pages (fdatasync: the
    kernel keeps dirty pages), then posix_fadvise(DONTNEED). `method` is what the action is
    reported as (``drop_caches`` when the whole cache was dropped first)."""
    before = resident_fraction(files)
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return CacheAction("cold", method, len(files), _size(files), before, resident_fraction(files))


def can_drop_caches() -> bool:
    """Whether this process may drop the whole page cache (root, and the file is writable)."""
    return os.geteuid() == 0 and os.access(DROP_CACHES, os.W_OK)


def drop_page_cache() -> None:
    """sync, then drop the page cache, dentries and inodes of the whole machine (root only)."""
    if not can_drop_caches():
        raise DataError(
            f"dropping the page cache needs root (write access to {DROP_CACHES}); use "
            "eviction of the dataset's files instead (posix_fadvise)"
        )
    os.sync()
    DROP_CACHES.write_text("3\n")
