"""Reading a run directory back: every rank's events as one Polars frame, clocks aligned."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from stallscope._schema import COLUMNS, SCHEMA
from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope._utils.text import ranks_text
from stallscope.exceptions import RunDirError, StallscopeWarning
from stallscope.io._run_dir import STEM_RE, event_files
from stallscope.io._run_json import read_run_json


@dataclass
class RunInfo:
    """What a run directory holds, and what is missing from it."""

    run_dir: Path
    processes: dict[str, dict[str, Any]]  # stem -> run.json entry ({} when run.json lacks it)
    files: dict[str, list[Path]]  # stem -> event files
    world_size: int | None
    ranks: list[int]
    missing_ranks: list[int] = field(default_factory=list)  # in world_size, no events at all
    unfinished: list[str] = field(default_factory=list)  # stems that never stopped (killed?)
    drops: dict[str, int] = field(default_factory=dict)  # stem -> events dropped while tracing
    # stem -> {counter: n} of the counters behind `drops` ("ring_full", "cupti.cupti_dropped", ...)
    drop_causes: dict[str, dict[str, int]] = field(default_factory=dict)
    # every process is an imported PyTorch profiler trace (stallscope import): a trace set may
    # hold only some ranks of its job, by choice
    imported: bool = False

    @property
    def coverage(self) -> str | None:
        """ "3 of 16 ranks' traces (ranks 0-2)" when the run holds some ranks of its job."""
        if not self.missing_ranks or not self.world_size:
            return None
        what = "ranks' traces" if self.imported else "ranks"
        return f"{len(self.ranks)} of {self.world_size} {what} ({ranks_text(self.ranks)})"

    @property
    def problems(self) -> list[str]:
        out = []
        if self.missing_ranks and self.imported:
            out.append(
                f"{self.coverage}: a PyTorch profiler trace set holding part of its job; the "
                "tables cover these ranks only"
            )
        elif self.missing_ranks:
            out.append(
                f"{ranks_text(self.missing_ranks)}: no event file (the process died before its "
                "first flush, or never traced)"
            )
        out += [
            f"{s}: trace never stopped (process killed?): events up to its last flush only"
            for s in self.unfinished
        ]
        out += [
            f"{s}: {n} events dropped while tracing: "
            + "; ".join(
                f"{k} {v} ({_DROP_HINTS.get(k, 'see run.json')})"
                for k, v in self.drop_causes.get(s, {}).items()
            )
            for s, n in self.drops.items()
            if n
        ]
        return out


def describe_step_source(source: Any, imported: bool = False) -> str | None:
    """run.json's ``step_source`` of a process in words (None when it has none: an older run);
    `imported`: the process is an imported PyTorch profiler trace."""
    if imported:
        return "from the ProfilerStep#N ranges of the PyTorch profiler traces"
    if not isinstance(source, dict):
        return None
    kind, by, n = source.get("source"), source.get("by", "?"), source.get("steps")
    count = f": {n} step{'' if n == 1 else 's'}" if isinstance(n, int) else ""
    if kind == "optimizer":
        first = source.get("first_step", "")
        return f"found from the optimizer's steps (the end of {by} ends each step; {first}){count}"
    if kind == "profiler":
        return f"found from torch.profiler's steps ({by} ends each step){count}"
    if kind == "forward":
        return f"found from the model's forward ({by} starts each step){count}"
    if kind == "stallscope.step":
        return "marked by the program (stallscope.step() or loader(mark_steps=True))"
    if kind == "none":
        return (
            "none found: no optimizer step, torch.profiler step or model forward ran while "
            "tracing (mark them with stallscope.step())"
        )
    return str(kind)


# What each drop counter of run.json means, and what to do about it.
_DROP_HINTS = {
    "ring_full": "rings full: raise ring_capacity",
    "no_thread_slot": "more recording threads than max_threads: raise max_threads",
    "nesting_too_deep": "regions nested over 256 deep",
    "cupti.buffers_declined": "CUPTI's buffers reached pool_limit_bytes: raise it with "
    "stallscope.capture._cupti.configure(pool_limit_bytes=...)",
    "cupti.cupti_dropped": "records CUPTI itself counted as dropped for want of buffer space",
    "cupti.incomplete_records": "GPU activities CUPTI had not completed when the trace stopped",
    "cupti.not_recorded": "CUPTI records the core refused: a full ring (also counted in "
    "ring_full: raise ring_capacity) or a record that came after the trace stopped",
    "cupti.unmatched_markers": "NVTX range ends whose start was not seen",
    "torch_dist.nccl_plugin_lost": "NCCL operations the profiler plugin could not record "
    "(over 4096 in flight on one communicator, or the rings were full)",
}


def run_info(run_dir: str | os.PathLike[str]) -> RunInfo:
    """Inspect a run directory (RunDirError when it is missing, holds no events or has a corrupt
    run.json)."""
    d = Path(run_dir)
    if not d.exists():
        raise RunDirError(
            f"{d}: no such run directory; pass the out_dir given to stallscope.trace()"
        )
    if not d.is_dir():
        raise RunDirError(f"{d}: not a directory; pass the run directory, not a file in it")
    doc = read_run_json(d)
    procs: dict[str, dict[str, Any]] = doc.get("processes", {}) if doc else {}
    files = event_files(d)
    if not files:
        hint = " (run.json lists processes, so they died before their first flush)" if procs else ""
        raise RunDirError(
            f"{d}: empty run: no rank-*.parquet event files{hint}; was tracing started, and did "
            "the process record anything?"
        )
    ranks = sorted({int(m.group(1)) for s in files if (m := STEM_RE.match(s))})
    sizes = {int(p["world_size"]) for p in procs.values() if isinstance(p.get("world_size"), int)}
    world = max(sizes) if sizes else None
    missing = sorted(set(range(world)) - set(ranks)) if world else []
    unfinished = sorted(s for s, p in procs.items() if p.get("status") == "running")
    causes = {s: c for s, p in procs.items() if (c := _drop_causes(p))}
    drops = {s: sum(c.values()) for s, c in causes.items()}
    imported = bool(procs) and all(p.get("source") == "kineto" for p in procs.values())
    return RunInfo(d, procs, files, world, ranks, missing, unfinished, drops, causes, imported)


def _drop_causes(entry: dict[str, Any]) -> dict[str, int]:
    """Events a process could not keep, by counter: the core's drops ("ring_full", ...) and
    every backend's ("cupti.cupti_dropped", "torch_dist.nccl_plugin_lost", ...), as listed in
    run.json; only counters above 0."""
    out: dict[str, int] = {}
    core = entry.get("drops")
    if isinstance(core, dict):
        out.update({k: v for k, v in core.items() if isinstance(v, int) and v})
    for name, b in (entry.get("backends") or {}).items():
        d = b.get("drops") if isinstance(b, dict) else None
        if isinstance(d, dict):
            out.update({f"{name}.{k}": v for k, v in d.items() if isinstance(v, int) and v})
    return out


def _check_file(path: Path) -> int | None:
    """Check that `path` is a readable event file; return the one rank all of its rows carry
    (from the rank column's Parquet statistics, which the writer keeps), None when its
    statistics do not say."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except FileNotFoundError:
        raise VanishedError(
            f"{path}: gone since the run directory was listed (a continuous trace's window "
            "deletes old part files): read the run again"
        ) from None
    except Exception as e:
        raise RunDirError(
            f"{path}: truncated or not a Parquet file ({type(e).__name__}: {e}); it was probably "
            "being written when its process died. Move it aside to load the rest of the run."
        ) from None
    have = meta.schema.names
    missing = [c for c in COLUMNS if c not in have]
    if missing:
        raise RunDirError(f"{path}: not a stallscope event file (missing columns {missing})")
    return _single_rank(meta, have.index("rank"))


def _single_rank(meta: Any, column: int) -> int | None:
    """The rank of every row of a file whose row groups' statistics of column `column` (rank)
    all have min == max == one value without nulls; None otherwise (or when a statistic is
    missing)."""
    ranks = set()
    for g in range(meta.num_row_groups):
        st = meta.row_group(g).column(column).statistics
        if st is None or not st.has_min_max or st.null_count != 0 or st.min != st.max:
            return None
        ranks.add(st.min)
        if len(ranks) > 1:
            return None
    return int(ranks.pop()) if len(ranks) == 1 else None


@dataclass(frozen=True)
class Clock:
    """One rank's alignment onto rank 0's clock: aligned = t + round(o_a + slope * (t - t_a))."""

    t_a: int
    o_a: int
    slope: float


def _clock_offsets(info: RunInfo) -> dict[int, Clock]:
    return clock_offsets(info.processes)


def clock_offsets(processes: dict[str, dict[str, Any]]) -> dict[int, Clock]:
    """Per rank: aligned = t + offset_a + slope * (t - t_a), from run.json's clock samples
    (`processes`: its entries; offset to rank 0 measured at start and stop, see the collective
    tracing backend). Processes of one rank share its host clock: the first process listed
    with samples wins."""
    out: dict[int, Clock] = {}
    for p in processes.values():
        samples = (p.get("clock") or {}).get("offsets") or []
        rank = p.get("rank")
        if not samples or not isinstance(rank, int) or rank in out:
            continue
        a, b = samples[0], samples[-1]
        ta, oa = int(a["local_ns"]), int(a["offset_ns"])
        tb, ob = int(b["local_ns"]), int(b["offset_ns"])
        out[rank] = Clock(ta, oa, (ob - oa) / (tb - ta) if tb != ta else 0.0)
    return out


def _aligned(lf: pl.LazyFrame, shift: pl.Expr) -> pl.LazyFrame:
    """`lf` with `shift` (ns, from start_ns; 0 where null) added to start_ns and end_ns (both
    computed from the original start_ns; Polars evaluates the shared shift once)."""
    ns = shift.round().cast(pl.Int64).fill_null(0)
    return lf.with_columns(start_ns=pl.col("start_ns") + ns, end_ns=pl.col("end_ns") + ns)


def _align_one_rank(lf: pl.LazyFrame, c: Clock) -> pl.LazyFrame:
    """Every row of `lf` belongs to the rank of clock `c`: its shift, from literals."""
    shift = pl.lit(c.o_a, pl.Int64) + pl.lit(c.slope, pl.Float64) * (
        pl.col("start_ns") - pl.lit(c.t_a, pl.Int64)
    )
    return _aligned(lf, shift)


def _align_by_join(lf: pl.LazyFrame, clocks: dict[int, Clock]) -> pl.LazyFrame:
    """Rows of any ranks: each gets its rank's shift by a join (no clock: no shift)."""
    per_rank = pl.LazyFrame(
        {
            "rank": list(clocks),
            "_t_a": [c.t_a for c in clocks.values()],
            "_o_a": [c.o_a for c in clocks.values()],
            "_slope": [c.slope for c in clocks.values()],
        },
        schema={"rank": pl.Int32, "_t_a": pl.Int64, "_o_a": pl.Int64, "_slope": pl.Float64},
    )
    shift = pl.col("_o_a") + pl.col("_slope") * (pl.col("start_ns") - pl.col("_t_a"))
    joined = lf.join(per_rank, on="rank", how="left", maintain_order="left")
    return _aligned(joined, shift).select(COLUMNS)


def _read(path: Path) -> pl.LazyFrame:
    """One event file in the event schema. Files of other writers (an older version, an
    importer) may store kind / category as Categorical, Enum of other values or strings: only
    the columns whose type differs from the schema's are cast (the native writer's files need
    none: Polars reads its dictionaries as the schema's Enums)."""
    lf = pl.scan_parquet(path)
    have = lf.collect_schema()
    casts = [pl.col(c).cast(t) for c, t in SCHEMA.items() if have.get(c) != t]
    if casts or list(have.names()) != list(COLUMNS):
        lf = lf.select([pl.col(c) for c in COLUMNS]).with_columns(casts)
    return lf


def scan(run_dir: str | os.PathLike[str], *, align_clocks: bool = True) -> pl.LazyFrame:
    """All ranks' events of a run directory as a LazyFrame in the event schema.

    With `align_clocks`, times are moved onto rank 0's clock using the offsets in run.json
    (when the run measured them). Problems that leave the data usable (a missing rank, a rank
    killed mid-run, dropped events) are reported as StallscopeWarning; unreadable files raise
    RunDirError naming the file.
    """
    info = run_info(run_dir)
    for problem in info.problems:
        warnings.warn(f"{info.run_dir}: {problem}", StallscopeWarning, stacklevel=2)
    return pl.concat([lf for _, lf in file_frames(info, align_clocks)], how="vertical")


def file_frames(
    info: RunInfo, align_clocks: bool = True, stems: list[str] | None = None
) -> list[tuple[int | None, pl.LazyFrame]]:
    """Every event file of `info` (of `stems` only, when given) as a LazyFrame in the event
    schema, with the one rank all of its rows carry (None when the file's statistics do not
    say: any ranks). Each file is cast to the schema on its own. A file of one rank (the
    native writer's: its rank statistics say so) is aligned with that rank's clock as
    literals; any other file by a join on rank."""
    files = info.files if stems is None else {s: info.files[s] for s in stems}
    paths = [p for ps in files.values() for p in ps]
    ranks = [_check_file(p) for p in paths]
    clocks = _clock_offsets(info) if align_clocks else {}
    out = []
    for path, rank in zip(paths, ranks, strict=True):
        lf = _read(path)
        if clocks and rank is None:
            lf = _align_by_join(lf, clocks)
        elif rank in clocks:
            lf = _align_one_rank(lf, clocks[rank])
        out.append((rank, lf))
    return out


class NotNativeError(Exception):
    """Files that `scan_native` cannot read as one (another schema): read them one by one."""


def scan_native(info: RunInfo, stems: list[str]) -> pl.LazyFrame:
    """The events of `stems` in one scan of all their files, not aligned (`align_eager` does
    that after the read): for files in the native writer's schema, as one reader over many
    files is several times faster than a scan per file. Raises NotNativeError when the first
    file has another schema; reading then raises a Polars error when a later one has (callers
    read such files one by one, `file_frames`, which names a bad file)."""
    paths = [p for s in stems for p in info.files[s]]
    lf = pl.scan_parquet(paths)
    if dict(lf.collect_schema()) != SCHEMA:
        raise NotNativeError(paths[0])
    return lf


def align_eager(df: pl.DataFrame, info: RunInfo) -> pl.DataFrame:
    """`df` (read unaligned) with start_ns and end_ns moved onto rank 0's clock by the shift
    `scan` gives each event, to the ns: per run of rows of one rank, in NumPy (a join on rank
    cost 4x as much on a 1,024-rank run). Rows with a null rank or start take the join."""
    clocks = _clock_offsets(info)
    if not clocks or df.height == 0:
        return df
    if df["rank"].null_count() or df["start_ns"].null_count() or df["end_ns"].null_count():
        return _align_by_join(df.lazy(), clocks).collect()
    rank = df["rank"].to_numpy()
    start, end = df["start_ns"].to_numpy(), df["end_ns"].to_numpy()
    new_start, new_end = start.copy(), end.copy()
    cuts = np.concatenate(([0], np.flatnonzero(rank[1:] != rank[:-1]) + 1, [rank.size]))
    for i0, i1 in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        c = clocks.get(int(rank[i0]))
        if c is None:
            continue
        # _align_one_rank's arithmetic in the same order: o_a + slope * (start - t_a), in
        # float64, rounded half to even
        x = (start[i0:i1] - c.t_a).astype(np.float64)
        x *= c.slope
        x += c.o_a
        shift = np.rint(x).astype(np.int64)
        new_start[i0:i1] += shift
        new_end[i0:i1] += shift
    return df.with_columns(_arrow.series(new_start, "start_ns"), _arrow.series(new_end, "end_ns"))


@fair_gil
def load(run_dir: str | os.PathLike[str], *, align_clocks: bool = True) -> pl.DataFrame:
    """All ranks' events of a run directory as a DataFrame (see `scan`). A running continuous
    trace deletes the part files that leave its window: a part gone while it is read makes
    `load` read the run again (the window then starts later)."""
    for attempt in range(_READS):
        try:
            if attempt == 0:
                return scan(run_dir, align_clocks=align_clocks).collect()
            with warnings.catch_warnings():  # told once, on the first read
                warnings.simplefilter("ignore", StallscopeWarning)
                return scan(run_dir, align_clocks=align_clocks).collect()
        except (VanishedError, FileNotFoundError, pl.exceptions.ComputeError) as e:
            if not _vanished(e) or attempt == _READS - 1:
                raise RunDirError(
                    f"{run_dir}: event files disappeared while they were read {_READS} times "
                    f"({e}); is a continuous trace's window moving faster than the run can be "
                    "read? Read an on-demand capture (stallscope capture) instead"
                ) from None
    raise AssertionError("unreachable")


_READS = 3


class VanishedError(RunDirError):
    """An event file was deleted between listing the run directory and reading it."""


def _vanished(e: Exception) -> bool:
    """An error of reading a file that is no longer there."""
    return isinstance(e, (VanishedError, FileNotFoundError)) or "No such file" in str(e)
