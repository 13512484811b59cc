"""The native reader's reading of Kineto files: each file streams through one
`_core.KinetoScanner` per import (gunzipped straight into its 0.5 MiB buffer, never held whole),
which keeps only the complete events that pass the importer's row checks, as typed columns with
strings as codes into dictionaries shared by every file of the import. `_native` converts what
it kept.

Each buffer of text is read by two threads: a second one reads its second part from a guessed
event start, and its events are taken only when the first thread's own reading arrives at that
start (csrc/kineto/segment_worker.h); the second thread then appends them while this thread
gunzips the next buffer. Results are the one-thread results, code for code.

On machines of 4+ cores the files of a folder are read side by side, a scanner each, whose
dictionaries are merged into the import's afterwards (the codes then differ from a one-scanner
read's; the strings they stand for, and so the events, do not).

The scanner takes the common shape only (see csrc/kineto/stream_scanner.h); for any other file
it says why, and the caller reads that file with the general reader, which also words the error
for malformed input.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from queue import Queue
from typing import Any, BinaryIO, Final

import numpy as np
import orjson

# ISA-L's gzip reader, loaded with this module (~1 ms to import): an import's first gzip file
# otherwise paid for it.
from isal import isal_zlib as _isal_zlib

from stallscope._utils.cpus import usable_cpus
from stallscope.exceptions import TraceImportError
from stallscope.io.kineto._fastjson import META_KEYS

_PIECE: Final = 1 << 18  # bytes of text per piece the gunzip thread hands over
_INLINE: Final = 1 << 19  # imports up to this size (bytes on disk) are gunzipped inline, no thread
# A gunzip thread beside the scanner's two threads only where each has a core. With two, this
# thread gunzips straight into the scanner's buffer (`Session._feed_file`) while the scanner's
# second thread reads on: the three contending for two cores measured no faster than one thread
# gunzipping, on the 2-core VM. The thread's pieces are fixed-size buffers (a decompressor's
# output grown by realloc came from a fresh mmap each time, whose page faults and unmaps cost
# the V100 import ~20 ms in a fresh process).
_GUNZIP_THREAD_CORES: Final = 3
# Several files read side by side, each by a scanner of its own (its dictionaries merged into
# the import's after), from this many cores: each scanner reads with two threads, so a pair of
# cores per file. HTA parses the ranks of a folder in a process pool; one scanner alone would
# keep an import of many files to two or three cores however many there are.
_SIDE_BY_SIDE_CORES: Final = 4


def available() -> bool:
    try:
        from stallscope import _core
    except ImportError:
        return False
    return hasattr(_core, "KinetoScanner")


def parse_meta(raw: bytes) -> dict[str, Any] | None:
    """The top-level members the importer reads (META_KEYS) from the scanner's metadata text
    (`{"traceEvents":[], <the file's other members>}`), as the general reader decodes them;
    None when orjson cannot take the text (an integer beyond 64 bits, say): the general reader
    then reads the file and decides. orjson, not msgspec: importing msgspec and building its
    typed decoder costs more than the metadata of a whole import."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    return {k: v for k in META_KEYS if (v := doc.get(k)) is not None}


def _gzip_readinto(
    f: BinaryIO,
) -> tuple[Callable[[memoryview], int | None], tuple[type[BaseException], ...]]:
    """readinto of the gzip stream `f` (members concatenated) and the errors it raises for
    broken gzip. ISA-L's reader inflates straight into the caller's buffer (no bytes object
    per piece: on the V100 trace 13 ms against 40 ms for a decompressor's 16 KiB pieces, in a
    fresh process)."""
    reader = _isal_zlib._GzipReader(f)  # what isal.igzip's files read through
    isal_error: type[BaseException] = _isal_zlib.IsalError  # type: ignore[assignment]
    return reader.readinto, (EOFError, OSError, isal_error)


def _gzip_error(path: Path, why: object) -> TraceImportError:
    return TraceImportError(
        f"{path}: corrupt or truncated gzip ({why}); re-copy the trace or gunzip it to check"
    )


@contextmanager
def _text(path: Path) -> Iterator[Callable[[memoryview], int | None]]:
    """readinto of the file's text, gunzipped when it is gzip (members concatenated); broken
    gzip raises TraceImportError naming the file."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise TraceImportError(f"{path}: cannot read ({e.strerror or e})") from None
    with f:
        gz = f.read(2) == b"\x1f\x8b"
        f.seek(0)
        if not gz:
            yield f.readinto
            return
        readinto, broken = _gzip_readinto(f)
        try:
            yield readinto
        except broken as e:
            raise _gzip_error(path, e) from None


def _pieces(path: Path) -> Iterator[bytearray]:
    """The file's text in pieces of _PIECE bytes (the last one shorter), for the gunzip thread."""
    with _text(path) as readinto:
        while True:
            piece = bytearray(_PIECE)
            n = readinto(memoryview(piece))
            if not n:
                return
            del piece[n:]
            yield piece


# CPUs this process may use: its cores, capped by its cgroup's CPU quota (a container's CPU
# limit). A name of this module's own, so that tests can set the machine's size.
_cores = usable_cpus


@dataclass
class FileScan:
    """What the scanner kept of one file."""

    path: Path
    res: dict[str, Any]
    meta: dict[str, Any]


class Session:
    """One import: a scanner whose string dictionaries the files share."""

    def __init__(self) -> None:
        from stallscope import _core

        self.scanner = _core.KinetoScanner()

    def read(self, path: Path) -> FileScan | None:
        """The file's columns, or None when the general reader must take it (the scanner does
        not accept its shape). TraceImportError for unreadable files and broken gzip."""
        return next(self.read_all([path]))[1]

    def read_all(self, paths: list[Path]) -> Iterator[tuple[Path, FileScan | None]]:
        """`read` of each path in turn, as a generator. Each file is read (gunzipped) straight
        into the scanner's buffer. When the files hold more than _INLINE bytes in all: with
        _SIDE_BY_SIDE_CORES cores and several files, they are read side by side, a scanner each
        (`_read_side_by_side`); else with _GUNZIP_THREAD_CORES cores one thread gunzips them, in
        order ahead of the scan (both release the GIL), across file boundaries, so a folder of
        small per-rank files overlaps too. The rest of a file the scanner declines is
        skipped."""
        sizes = []
        for path in paths:
            try:
                sizes.append(path.stat().st_size)
            except OSError:
                sizes.append(0)  # the read words the error
        cores = _cores()
        workers = min(len(paths), cores // 2)
        if cores >= _SIDE_BY_SIDE_CORES and workers >= 2 and sum(sizes) > _INLINE:
            yield from self._read_side_by_side(paths, sizes, workers)
            return
        # Small imports (a thread would cost more than it overlaps), or no core for a thread.
        if sum(sizes) <= _INLINE or cores < _GUNZIP_THREAD_CORES:
            for path, size in zip(paths, sizes, strict=True):
                self._begin(path, size)
                yield path, self._end(path, self._feed_file(path))
            return
        q: Queue[tuple[int, bytearray | BaseException | None]] = Queue(maxsize=3)
        stop = threading.Event()
        skip = [-1]  # the file whose remaining pieces the producer drops

        def produce() -> None:
            for i, path in enumerate(paths):
                try:
                    for piece in _pieces(path):
                        if stop.is_set():
                            return
                        if skip[0] == i:
                            break
                        q.put((i, piece))
                    q.put((i, None))
                except BaseException as e:  # handed to the reader, raised there
                    q.put((i, e))
                    return

        t = threading.Thread(target=produce, name="stallscope-gunzip", daemon=True)
        t.start()
        try:
            for i, (path, size) in enumerate(zip(paths, sizes, strict=True)):
                self._begin(path, size)
                ok = True
                while True:
                    j, item = q.get()
                    assert j == i, (j, i)
                    if item is None:
                        break
                    if isinstance(item, BaseException):
                        raise item
                    if ok and not self.scanner.feed(item):
                        ok = False
                        skip[0] = i
                yield path, self._end(path, ok)
        finally:
            stop.set()
            while t.is_alive():  # unblock a producer waiting on a full queue
                while not q.empty():
                    q.get_nowait()
                t.join(0.01)

    def _read_side_by_side(
        self, paths: list[Path], sizes: list[int], workers: int
    ) -> Iterator[tuple[Path, FileScan | None]]:
        """`read_all` with `workers` threads, each reading whole files with a scanner of its
        own. Files go to workers largest first, each to the least loaded (a fixed assignment:
        the merged dictionaries' codes do not depend on timing). Once all are read, each
        worker's dictionaries are merged into this session's (in worker order) and its files'
        codes mapped to them; results and errors then come in file order, as `read_all`
        gives them."""
        owner = [0] * len(paths)  # file -> its worker
        load = [0] * workers
        for i in sorted(range(len(paths)), key=lambda i: -sizes[i]):
            owner[i] = load.index(min(load))
            load[owner[i]] += sizes[i]
        sessions = [Session() for _ in range(workers)]
        results: list[FileScan | BaseException | None] = [None] * len(paths)

        def run(w: int) -> None:
            ws = sessions[w]
            for i in (i for i in range(len(paths)) if owner[i] == w):
                try:
                    ws._begin(paths[i], sizes[i])
                    results[i] = ws._end(paths[i], ws._feed_file(paths[i]))
                except BaseException as e:  # raised in file order by the caller's thread
                    results[i] = e

        threads = [
            threading.Thread(target=run, args=(w,), name=f"stallscope-read-{w}")
            for w in range(workers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        maps = [self.scanner.adopt(ws.scanner) for ws in sessions]
        for ws in sessions:
            ws.scanner.release_buffers()
        for i, path in enumerate(paths):
            got = results[i]
            if isinstance(got, BaseException):
                raise got
            if got is not None:
                _remap(got.res, *maps[owner[i]])
            yield path, got

    def _feed_file(self, path: Path) -> bool:
        """The file's text read (gunzipped) straight into the scanner's buffer; False once the
        scanner declines it (the rest is not read)."""
        with _text(path) as readinto:
            return self.scanner.feed_from(readinto)

    def _begin(self, path: Path, size: int) -> None:
        # Text size guess for the column reservation: gzip'd JSON traces shrink about 18x.
        self.scanner.begin_file(size * (20 if path.name.endswith(".gz") else 1))

    def _end(self, path: Path, ok: bool) -> FileScan | None:
        sc = self.scanner
        res = sc.end_file() if ok else "unsupported"
        if isinstance(res, str):
            sc.begin_file()
            return None
        meta = parse_meta(res["meta_json"])
        if meta is None:
            return None
        return FileScan(path, res, meta)


def _remap(
    res: dict[str, Any],
    cat: np.ndarray[Any, Any],
    name: np.ndarray[Any, Any],
    args: np.ndarray[Any, Any],
) -> None:
    """A file's string codes (end_file's result) from another scanner's dictionaries to the
    session's, through `adopt`'s maps; -1 (null) stays."""

    def mapped(codes: np.ndarray[Any, Any], m: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.where(codes < 0, codes, m[np.maximum(codes, 0)]) if len(m) else codes

    rows, nccl, flows = res["rows"], res["nccl"], res["flows"]
    rows["cat"], rows["name"] = mapped(rows["cat"], cat), mapped(rows["name"], name)
    rows["sync_kind"] = mapped(rows["sync_kind"], args)
    for key in ("coll", "dtype", "pg", "pg_desc", "pg_ranks"):
        nccl[key] = mapped(nccl[key], args)
    flows["cat"] = mapped(flows["cat"], cat)
