"""The stall table of a run directory too large for memory: ranks read in batches.

Each batch of ranks is read (the columns the table needs; names, details and sizes of the step
markers and collectives only), and its part of the table computed alone (`local_parts`: every
collective as transfer, the exposed communication, the arrivals). What crosses ranks is then
done on the arrivals of all ranks alone (`split_sync_wait`). The result equals
stall_table(stallscope.load(run)) (analysis/stall/_exposed.py says why); memory holds one
batch's events plus the small parts of every batch.

One rule of the table is run-wide: a run is a GPU run when any rank has GPU activity. A batch
without GPU activity read before the first batch with some is read again as part of a GPU run
(in a real GPU run every rank has GPU activity, so this costs nothing there).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import polars as pl

from stallscope._schema import conform
from stallscope._utils.gil import fair_gil
from stallscope.analysis.stall._exposed import LocalParts, local_parts, split_sync_wait
from stallscope.analysis.stall._sources import COMM_KINDS, NEEDED
from stallscope.exceptions import StallscopeWarning
from stallscope.io._load import RunInfo, file_frames, run_info

SYNC_KINDS = ("step", "collective", "p2p")
"""The kinds kept whole by `stream_run` (the rows match_collectives and stragglers read)."""


@dataclass
class StreamedRun:
    """What `stream_run` gives: the stall table, and the step markers and collective / p2p
    events of every rank (all columns: for match_collectives and stragglers)."""

    table: pl.DataFrame
    sync_events: pl.DataFrame
    batches: int  # batches read (a batch read again counts again)


def _batches(info: RunInfo, ranks_per_batch: int) -> list[list[int]]:
    ranks = info.ranks
    return [ranks[i : i + ranks_per_batch] for i in range(0, len(ranks), ranks_per_batch)]


def _batch_frame(frames: list[tuple[int | None, pl.LazyFrame]], ranks: list[int]) -> pl.DataFrame:
    """The events of `ranks`: the table's columns, with names, details and sizes of the comm
    rows and step markers only (null / 0 on the others, which the table does not read)."""
    want = set(ranks)
    parts = []
    for rank, lf in frames:
        if rank is None:
            parts.append(lf.filter(pl.col("rank").is_in(ranks)))
        elif rank in want:
            parts.append(lf)
    lf = conform(pl.concat(parts, how="vertical"))
    kept = pl.col("kind").is_in((*COMM_KINDS, "step"))
    return lf.select(
        *NEEDED,
        *(pl.when(kept).then(pl.col(c)).alias(c) for c in ("name", "detail")),
        bytes=pl.when(kept).then(pl.col("bytes")).otherwise(pl.lit(0, pl.Int64)),
    ).collect()


def _sync_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The step markers and collective / p2p rows of a batch, in the event schema (pid,
    device and value, which no analysis of them reads, as the schema's defaults)."""
    return conform(df.lazy().filter(pl.col("kind").is_in(SYNC_KINDS))).collect()


@fair_gil
def stream_run(
    run_dir: str | os.PathLike[str], *, ranks_per_batch: int = 32, align_clocks: bool = True
) -> StreamedRun:
    """The stall table of a run directory, `ranks_per_batch` ranks in memory at a time (see
    the module docstring), with the step markers and collective / p2p events of every rank.
    Problems that leave the data usable are warned about as `load` does."""
    if ranks_per_batch < 1:
        raise ValueError(f"ranks_per_batch={ranks_per_batch}: use 1 or more")
    info = run_info(run_dir)
    for problem in info.problems:
        warnings.warn(f"{info.run_dir}: {problem}", StallscopeWarning, stacklevel=3)
    frames = file_frames(info, align_clocks)
    got: dict[int, tuple[LocalParts, pl.DataFrame]] = {}
    cpu_batches: list[int] = []  # batches computed as a CPU run
    gpu = False
    batches = _batches(info, ranks_per_batch)
    reads = 0
    for i, ranks in enumerate(batches):
        df = _batch_frame(frames, ranks)
        reads += 1
        parts = local_parts(df, gpu=gpu)
        sync = _sync_rows(df)
        del df
        if parts.gpu and not gpu:
            gpu = True
            for j in cpu_batches:  # read again as part of a GPU run
                reads += 1
                got[j] = (local_parts(_batch_frame(frames, batches[j]), gpu=True), got[j][1])
            cpu_batches.clear()
        elif not parts.gpu:
            cpu_batches.append(i)
        got[i] = (parts, sync)
    done = [got[i] for i in range(len(batches))]
    table = pl.concat([p.table for p, _ in done])
    exposed = pl.concat([p.exposed for p, _ in done])
    arrivals = pl.concat([p.arrivals for p, _ in done])
    out = split_sync_wait(table, exposed, arrivals)
    sync_events = pl.concat([s for _, s in done])
    return StreamedRun(out, sync_events, reads)


def stall_table_run(
    run_dir: str | os.PathLike[str], *, ranks_per_batch: int = 32, align_clocks: bool = True
) -> pl.DataFrame:
    """stall_table(stallscope.load(run_dir)), `ranks_per_batch` ranks in memory at a time."""
    return stream_run(run_dir, ranks_per_batch=ranks_per_batch, align_clocks=align_clocks).table
