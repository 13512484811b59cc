"""The run directory: file names and run.json.

A run directory holds, per traced process:

- ``rank-NNNNN.parquet``: its events (one row group per flush), written when its trace stops.
- ``rank-NNNNN.part-MMMMMM.parquet``: while the trace runs, one complete Parquet file per flush
  (at most ``flush_interval`` apart). stop() merges them into ``rank-NNNNN.parquet`` and deletes
  them; after a SIGKILL they stay, every one readable, and `load` reads them.
- A traced process that is a fork()ed child of a traced process (a DataLoader worker that calls
  stallscope.trace itself) uses the stem ``rank-NNNNN.pid-PPPP``.

``run.json`` has one entry per process stem, written at start and updated at stop (under a file
lock, since every rank writes it): placement, host, pid, clocks, versions, per-thread drop counts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from stallscope.exceptions import RunDirError

RUN_JSON = "run.json"
FORMAT = "stallscope-run"
FORMAT_VERSION = 1

STEM_RE = re.compile(r"^rank-(\d{5,})(?:\.pid-(\d+))?$")
FILE_RE = re.compile(r"^(rank-\d{5,}(?:\.pid-\d+)?)(?:\.part-(\d{6,}))?\.parquet$")


def stem_for(rank: int, pid: int | None = None) -> str:
    return f"rank-{rank:05d}" if pid is None else f"rank-{rank:05d}.pid-{pid}"


def final_path(out_dir: Path, stem: str) -> Path:
    return out_dir / f"{stem}.parquet"


def part_path(out_dir: Path, stem: str, seq: int) -> Path:
    return out_dir / f"{stem}.part-{seq:06d}.parquet"


def event_files(run_dir: Path) -> dict[str, list[Path]]:
    """stem -> its event files. A stem with a final file uses only it (leftover parts of a
    merge that was interrupted after the rename are already inside it)."""
    finals: dict[str, Path] = {}
    parts: dict[str, list[tuple[int, Path]]] = {}
    for p in run_dir.iterdir():
        m = FILE_RE.match(p.name)
        if not m:
            continue
        if m.group(2) is None:
            finals[m.group(1)] = p
        else:
            parts.setdefault(m.group(1), []).append((int(m.group(2)), p))
    out: dict[str, list[Path]] = {}
    for stem in sorted(set(finals) | set(parts)):
        out[stem] = [finals[stem]] if stem in finals else [p for _, p in sorted(parts[stem])]
    return out


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    lock = run_dir / ".run.json.lock"
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """run.json's content; {} when absent. RunDirError naming the file when it is corrupt."""
    path = run_dir / RUN_JSON
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RunDirError(
            f"{path}: corrupt run.json ({e}); the per-rank .parquet files are intact: delete "
            "run.json to load them without run metadata (no clock alignment, no drop counts)"
        ) from None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != FORMAT
        or not isinstance(doc.get("processes"), dict)
    ):
        raise RunDirError(
            f"{path}: not a stallscope run.json (expected an object with format={FORMAT!r} and "
            "'processes'); delete it to load the event files without run metadata"
        )
    return doc


def update_process(run_dir: Path, stem: str, entry: dict[str, Any]) -> None:
    """Merge `entry` into run.json's entry for `stem`, atomically, under the directory's lock."""
    with _locked(run_dir):
        try:
            doc = read_run_json(run_dir)
        except RunDirError:
            doc = {}
        if not doc:
            doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "processes": {}}
        doc["processes"].setdefault(stem, {}).update(entry)
        tmp = run_dir / f".{RUN_JSON}.{os.getpid()}.tmp"
        tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        os.replace(tmp, run_dir / RUN_JSON)
