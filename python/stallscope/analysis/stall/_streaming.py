"""The stall table of a run directory too large for memory: ranks read in batches.

Each batch of ranks is read (the columns the table needs; names, details and sizes of the step
markers and collectives only), and its part of the table computed alone (`local_parts`: every
collective as transfer, the exposed communication, the arrivals). What crosses ranks is then
done on the arrivals of all ranks alone (`split_sync_wait`). The result equals
stall_table(stallscope.load(run)) (analysis/stall/_exposed.py says why); memory holds one
batch's events plus the small parts of every batch.

One rule of the table is run-wide: a run is a GPU run when any rank has GPU activity. Batches
without GPU activity in a run with some are read again as part of a GPU run (in a real GPU run
every rank has GPU activity, so this costs nothing there).

How: the rank-local parts come from the C++ sweep (`_native.sweep`, csrc/analysis/
stall_sweep.cc), which also moves each rank's times onto rank 0's clock, so a batch is read
as the files hold it and never copied to be aligned; only its step markers and collectives
are aligned, in NumPy. Two worker threads each take a batch at a time: one reads (Polars,
without the GIL) while the other sweeps (C++, without the GIL). Files that are not in the
native writer's schema, or hold rows of ranks outside their name, are read file by file,
aligned by `file_frames`, and swept the same way.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from stallscope._schema import conform
from stallscope._utils.cpus import usable_cpus
from stallscope._utils.gil import fair_gil
from stallscope.analysis.stall._exposed import LocalParts, _arrivals, split_parts
from stallscope.analysis.stall._native import conformed, sweep
from stallscope.analysis.stall._sources import NEEDED
from stallscope.exceptions import StallscopeWarning
from stallscope.io._load import (
    Clock,
    NotNativeError,
    RunInfo,
    align_eager,
    clock_offsets,
    file_frames,
    run_info,
    scan_native,
)
from stallscope.io._run_dir import STEM_RE

Array = np.ndarray[Any, Any]

SYNC_KINDS = ("step", "collective", "p2p")
"""The kinds kept whole by `stream_run` (the rows match_collectives and stragglers read)."""


@dataclass
class StreamedRun:
    """What `stream_run` gives: the stall table, and the step markers and collective / p2p
    events of every rank (all columns: for match_collectives and stragglers)."""

    table: pl.DataFrame
    sync_events: pl.DataFrame
    batches: int  # batches read (a batch read again counts again)


def _batches(info: RunInfo, ranks_per_batch: int) -> list[list[str]]:
    """The process stems of the run in batches of `ranks_per_batch` ranks."""
    by_rank: dict[int, list[str]] = {}
    for stem in info.files:
        m = STEM_RE.match(stem)
        by_rank.setdefault(int(m.group(1)) if m else -1, []).append(stem)
    ranks = sorted(by_rank)
    return [
        [s for r in ranks[i : i + ranks_per_batch] for s in by_rank[r]]
        for i in range(0, len(ranks), ranks_per_batch)
    ]


class _ForeignRanksError(Exception):
    """A file holds rows of ranks outside its name's batch: read file by file instead."""


class _Reader:
    """Reads a batch of stems: in one scan when the files are in the native writer's schema
    and every row's rank is its file name's (the common case), else file by file (`slow`:
    batches by the ranks the files' statistics give, any file cast on its own)."""

    def __init__(self, info: RunInfo, align_clocks: bool) -> None:
        self.info = info
        self.align_clocks = align_clocks
        self.slow = False
        self._frames: list[tuple[int | None, pl.LazyFrame]] | None = None

    def frame(self, stems: list[str]) -> tuple[pl.DataFrame, bool]:
        """The batch's events, and whether they come from the one scan of a batch in the
        native schema (then unaligned: the sweep aligns them; their ranks still to be checked)
        or file by file (aligned already)."""
        if not self.slow:
            try:
                return _select(scan_native(self.info, stems), native=True).collect(), True
            except (NotNativeError, pl.exceptions.PolarsError, OSError):
                return self._by_file(stems), False
        return self._by_file(stems), False

    def named(self, stems: list[str]) -> set[int]:
        return {int(m.group(1)) for s in stems if (m := STEM_RE.match(s))}

    def _by_file(self, stems: list[str]) -> pl.DataFrame:
        """The batch's events from files read one by one (each cast on its own; a bad one is
        named by `file_frames`): the stems' files, or once `slow`, every file whose
        statistics say it holds a rank of the batch, or do not say (then filtered)."""
        ranks = sorted({int(m.group(1)) for s in stems if (m := STEM_RE.match(s))})
        frames = self._all() if self.slow else file_frames(self.info, self.align_clocks, stems)
        want = set(ranks)
        parts = [lf for r, lf in frames if r is None or r in want]
        lf = pl.concat(parts, how="vertical").filter(pl.col("rank").is_in(ranks))
        return _select(lf).collect()

    def _all(self) -> list[tuple[int | None, pl.LazyFrame]]:
        if self._frames is None:
            self._frames = file_frames(self.info, self.align_clocks)
        return self._frames


def _select(lf: pl.LazyFrame, native: bool = False) -> pl.LazyFrame:
    """The columns the table and the step markers and collectives need (names, details and
    sizes are read on every row: taking them apart costs more than the decoding); `native`:
    `lf` is in the event schema already (no cast to plan)."""
    return (lf if native else conform(lf)).select(*NEEDED, "name", "detail", "bytes")


def _sync_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The step markers and collective / p2p rows of a batch, in the event schema (pid,
    device and value, which no analysis of them reads, as the schema's defaults)."""
    return conform(df.lazy().filter(pl.col("kind").is_in(SYNC_KINDS))).collect()


@fair_gil
def stream_run(
    run_dir: str | os.PathLike[str],
    *,
    ranks_per_batch: int = 32,
    align_clocks: bool = True,
    workers: int | None = None,
) -> StreamedRun:
    """The stall table of a run directory, `ranks_per_batch` ranks in memory at a time per
    worker thread (`workers`, default: the CPUs this process may use, at most 8; see the
    module docstring), with the step markers and collective / p2p events of every rank.
    Problems that leave the data usable are warned about as `load` does."""
    if ranks_per_batch < 1:
        raise ValueError(f"ranks_per_batch={ranks_per_batch}: use 1 or more")
    info = run_info(run_dir)
    for problem in info.problems:
        warnings.warn(f"{info.run_dir}: {problem}", StallscopeWarning, stacklevel=3)
    reader = _Reader(info, align_clocks)
    workers = max(1, min(workers if workers is not None else usable_cpus(), 8))
    try:
        return _stream(reader, _batches(info, ranks_per_batch), workers)
    except _ForeignRanksError:
        reader.slow = True
        return _stream(reader, _batches(info, ranks_per_batch), workers)


@dataclass
class _Batch:
    """A batch's part: its local table, exposed communication (rank, start, end, network) and
    arrivals, its step markers and collectives."""

    parts: LocalParts
    exposed: tuple[Array, Array, Array, Array]
    sync: pl.DataFrame


def _stream(reader: _Reader, batches: list[list[str]], workers: int) -> StreamedRun:
    """Every batch's parts (`workers` batches at a time: the reads and the sweeps let go of
    the GIL), then the cross-rank split: the waits from every rank's arrivals, then each
    batch's sync wait (in C++, `workers` batches at a time)."""
    clocks = clock_offsets(reader.info.processes) if reader.align_clocks else {}

    def one(stems: list[str], gpu: bool) -> _Batch:
        df, scanned = reader.frame(stems)
        batch, ranks = _parts(df, gpu, clocks if scanned else None, reader.info)
        if scanned and not set(ranks.tolist()) <= reader.named(stems):
            raise _ForeignRanksError
        return batch

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stallscope-batch") as pool:
        done = list(pool.map(one, batches, [False] * len(batches)))
        reads = len(batches)
        if any(b.parts.gpu for b in done):  # a GPU run: batches read as CPU runs, again
            again = [i for i, b in enumerate(done) if not b.parts.gpu]
            redo = pool.map(one, [batches[i] for i in again], [True] * len(again))
            for i, b in zip(again, redo, strict=True):
                b.sync = done[i].sync
                done[i] = b
            reads += len(again)
        arrivals = pl.concat([b.parts.arrivals for b in done], rechunk=True)
        tables = split_parts(
            [b.parts.table for b in done], [b.exposed for b in done], arrivals, pool.map
        )
    # one chunk: gathers on a frame of thousands of chunks (a batch's row groups) are slow
    sync_events = pl.concat([b.sync for b in done], rechunk=True)
    return StreamedRun(pl.concat(tables), sync_events, reads)


def _parts(
    df: pl.DataFrame, gpu: bool, clocks: dict[int, Clock] | None, info: RunInfo
) -> tuple[_Batch, Array]:
    """A batch's part and the ranks of its rows (`clocks`: the batch is on each rank's own
    clock: the sweep aligns it, and the rows kept are aligned here)."""
    swept = sweep(conformed(df), gpu=gpu, clocks=clocks, exposed_frame=False)
    sync = _sync_rows(df)
    if clocks:
        sync = align_eager(sync, info)
    parts = swept.parts
    parts.arrivals = _arrivals(sync.drop_nulls(("rank", "kind", "start_ns", "end_ns")))
    return _Batch(parts, swept.exposed, sync), swept.ranks


def stall_table_run(
    run_dir: str | os.PathLike[str], *, ranks_per_batch: int = 32, align_clocks: bool = True
) -> pl.DataFrame:
    """stall_table(stallscope.load(run_dir)), `ranks_per_batch` ranks in memory at a time."""
    return stream_run(run_dir, ranks_per_batch=ranks_per_batch, align_clocks=align_clocks).table
