"""The per-step summary files of a continuous trace: written while the job runs, readable at
any moment, never a torn row.

Each traced process appends its rows to ``RUN/summary/<stem>.NNNNNN.jsonl`` (one JSON object a
line, each written whole and ended by a newline). Once that file holds ``rows_per_file`` rows
it is rolled: its rows are written to ``<stem>.NNNNNN.parquet`` (a temporary name, then a
rename), the JSON-lines file is deleted and NNNNNN + 1 begins. A reader takes every Parquet
file and every JSON-lines file without a Parquet file of the same number (a roll in progress
shows both), and of a JSON-lines file only the lines ended by a newline (the line being
appended is not yet one). So a reader sees every row once, whole; DuckDB, Spark or any Parquet
engine can read ``summary/*.parquet`` (the rolled rows) directly.

A row is the rank's view of one step (`ROW_SCHEMA`): the stall table's columns with every
collective taken as transfer (sync wait needs other ranks: `stallscope.load_summary` splits it
off), the exposed communication intervals (``exp_*``) and the rank's arrivals at its
collectives (``coll_*``) that the split reads (analysis/stall/_exposed.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
import polars as pl

SUMMARY_DIR: Final = "summary"
FILE_RE: Final = re.compile(r"^(rank-\d{5,}(?:\.pid-\d+)?)\.(\d{6,})\.(jsonl|parquet)$")

#: The stall table's columns, in its order (analysis.stall.STALL_COLUMNS; a test holds them
#: equal): the summary is written here, below the analysis layer.
STALL_COLUMNS: Final = (
    "compute_ns",
    "memcpy_ns",
    "sync_wait_ns",
    "network_ns",
    "interconnect_ns",
    "data_fetch_ns",
    "data_prep_ns",
    "data_ns",
    "host_ns",
)
ROW_SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "step": pl.Int64(),
    "start_ns": pl.Int64(),  # the rank's own clock (CLOCK_MONOTONIC), as in its event files
    "end_ns": pl.Int64(),
    "step_ns": pl.Int64(),
    **{c: pl.Int64() for c in STALL_COLUMNS},
    "events": pl.Int64(),  # events of the rank that overlap the step
    "exp_start": pl.List(pl.Int64()),  # exposed communication: start, end, network (else
    "exp_end": pl.List(pl.Int64()),  # interconnect), ns on the rank's clock
    "exp_net": pl.List(pl.Boolean()),
    "coll_key": pl.List(pl.String()),  # arrivals: instance key (group and operation)
    "coll_seq": pl.List(pl.Int64()),  # sequence number in the group
    "coll_start": pl.List(pl.Int64()),
    "coll_end": pl.List(pl.Int64()),
    "coll_size": pl.List(pl.Int32()),  # members of the group (null: not said)
    # A row that is no step: the arrivals a rank made after its last step (written when its
    # trace stops), which other ranks' waits may depend on. Its step and times are null.
    "arrivals_only": pl.Boolean(),
    # Were the step's device (GPU) events recorded (true where the run has none). False: a
    # continuous trace's step outside its device windows; its compute, memcpy, sync wait,
    # network, interconnect and host columns are null (only the device could say), its step
    # time and data columns are there. Rows of earlier versions lack it: read as true.
    "device": pl.Boolean(),
}
OPTIONAL: Final = {"device": True}  # columns a row may lack, and the value it then has
DEVICE_COLUMNS: Final = (
    "compute_ns",
    "memcpy_ns",
    "sync_wait_ns",
    "network_ns",
    "interconnect_ns",
    "host_ns",
)


def summary_dir(run_dir: Path) -> Path:
    return run_dir / SUMMARY_DIR


@dataclass
class SummaryWriter:
    """Appends one process's rows (dicts with ROW_SCHEMA's keys) to its summary files."""

    run_dir: Path
    stem: str
    rows_per_file: int = 1000
    seq: int = 0
    rows_in_file: int = 0
    rows_written: int = 0
    bytes_written: int = 0
    _rows: list[dict[str, Any]] = field(default_factory=list)  # the current file's, to roll

    def __post_init__(self) -> None:
        d = summary_dir(self.run_dir)
        d.mkdir(parents=True, exist_ok=True)
        # A directory reused with overwrite=True: continue after the files already there.
        taken = [
            int(m.group(2))
            for p in d.iterdir()
            if (m := FILE_RE.match(p.name)) and m.group(1) == self.stem
        ]
        self.seq = max(taken, default=-1) + 1

    def _path(self, ext: str) -> Path:
        return summary_dir(self.run_dir) / f"{self.stem}.{self.seq:06d}.{ext}"

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append `rows`, each one line written whole; roll the file when it is full."""
        if not rows:
            return
        lines = [orjson.dumps(r) + b"\n" for r in rows]
        data = b"".join(lines)
        # O_APPEND and one write() per batch: a reader sees whole lines and at most a partial
        # last one, which it leaves for later.
        fd = os.open(self._path("jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
        self._rows.extend(rows)
        self.rows_in_file += len(rows)
        self.rows_written += len(rows)
        self.bytes_written += len(data)
        if self.rows_in_file >= self.rows_per_file:
            self.roll()

    def roll(self) -> None:
        """Write the current JSON-lines file's rows as Parquet, delete it, start the next."""
        if not self._rows:
            return
        src = self._path("jsonl")
        dst = self._path("parquet")
        tmp = dst.with_name(f".{dst.name}.tmp")
        rows_frame(self._rows).write_parquet(tmp, compression="zstd", compression_level=3)
        os.replace(tmp, dst)
        src.unlink(missing_ok=True)
        self._rows.clear()
        self.rows_in_file = 0
        self.seq += 1


def rows_frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """Rows (dicts with ROW_SCHEMA's keys) as a frame of ROW_SCHEMA."""
    if not rows:
        return pl.DataFrame(schema=ROW_SCHEMA)
    return pl.DataFrame(list(rows), schema=ROW_SCHEMA)


@dataclass
class SummaryRead:
    """The summary rows of a run directory (ROW_SCHEMA), and the lines that could not be read
    (a write cut short by a full disk, say)."""

    rows: pl.DataFrame
    bad_lines: dict[str, int]  # file name -> lines that are not a row
    files: int


def _whole_lines(path: Path, tail_bytes: int | None) -> list[bytes]:
    with path.open("rb") as f:
        if tail_bytes is not None:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - tail_bytes))
        data = f.read()
    if tail_bytes is not None and len(data) >= tail_bytes:
        data = data[data.find(b"\n") + 1 :]  # the first line may be cut: start after it
    end = data.rfind(b"\n")
    return data[: end + 1].splitlines() if end >= 0 else []


def read_rows(run_dir: Path, *, last_rows: int | None = None) -> SummaryRead:
    """Every summary row of `run_dir` (see the module docstring); with `last_rows`, at most
    about that many of each process, the latest (from its latest files only)."""
    d = summary_dir(run_dir)
    per: dict[str, dict[int, dict[str, Path]]] = {}
    if d.is_dir():
        for p in d.iterdir():
            m = FILE_RE.match(p.name)
            if m:
                per.setdefault(m.group(1), {}).setdefault(int(m.group(2)), {})[m.group(3)] = p
    frames: list[pl.DataFrame] = []
    bad: dict[str, int] = {}
    files = 0
    for stem in sorted(per):
        got = 0
        for seq in sorted(per[stem], reverse=True):
            kinds = per[stem][seq]
            if "parquet" in kinds:
                try:
                    frame = pl.read_parquet(kinds["parquet"])
                except FileNotFoundError:  # removed meanwhile: cannot happen to a rolled file
                    continue
            else:
                try:
                    tail = None if last_rows is None else 4096 * (last_rows + 1)
                    lines = _whole_lines(kinds["jsonl"], tail)
                except FileNotFoundError:  # rolled meanwhile: read its Parquet file
                    p = kinds["jsonl"].with_suffix(".parquet")
                    if not p.exists():
                        continue
                    frame = pl.read_parquet(p)
                else:
                    good, n_bad = _parse(lines)
                    if n_bad:
                        bad[kinds["jsonl"].name] = n_bad
                    frame = rows_frame(good)
            files += 1
            frames.append(frame)
            got += frame.height
            if last_rows is not None and got >= last_rows:
                break
    if not frames:
        return SummaryRead(pl.DataFrame(schema=ROW_SCHEMA), bad, files)
    rows = pl.concat([_complete(f).cast(ROW_SCHEMA) for f in frames])  # type: ignore[arg-type]
    if last_rows is not None:
        rows = rows.sort("rank", "start_ns").group_by("rank", maintain_order=True).tail(last_rows)
    return SummaryRead(rows.sort("rank", "start_ns"), bad, files)


def _complete(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with the OPTIONAL columns it lacks, or holds nulls in, set to their value."""
    return frame.with_columns(
        pl.col(c).fill_null(v) if c in frame.columns else pl.lit(v).alias(c)
        for c, v in OPTIONAL.items()
    )


def _parse(lines: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    """The lines that are rows (a JSON object with the row's keys), and how many are not."""
    good = []
    for x in lines:
        try:
            doc = orjson.loads(x)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict) and all(k in doc or k in OPTIONAL for k in ROW_SCHEMA):
            good.append(doc)
    return good, len(lines) - len(good)
