"""Reading a run directory back: every rank's events as one Polars frame, clocks aligned."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from stallscope._run_dir import STEM_RE, event_files, read_run_json
from stallscope._schema import COLUMNS, SCHEMA
from stallscope.exceptions import RunDirError, StallscopeWarning


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

    @property
    def problems(self) -> list[str]:
        out = [
            f"rank {r}: no event file (the process died before its first flush, or never traced)"
            for r in self.missing_ranks
        ]
        out += [
            f"{s}: trace never stopped (process killed?): events up to its last flush only"
            for s in self.unfinished
        ]
        out += [
            f"{s}: {n} events dropped while tracing (rings full; raise ring_capacity)"
            for s, n in self.drops.items()
            if n
        ]
        return out


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
    drops = {s: _dropped(p) for s, p in procs.items() if _dropped(p)}
    return RunInfo(d, procs, files, world, ranks, missing, unfinished, drops)


def _dropped(entry: dict[str, Any]) -> int:
    """Events a process could not keep: the core's drops plus every backend's (CUPTI's
    records, the NCCL plugin's operations), as listed in run.json."""
    counts = [entry.get("drops") or {}]
    counts += [
        b.get("drops") or {} for b in (entry.get("backends") or {}).values() if isinstance(b, dict)
    ]
    return sum(
        int(v) for c in counts if isinstance(c, dict) for v in c.values() if isinstance(v, int)
    )


def _check_file(path: Path) -> None:
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except Exception as e:
        raise RunDirError(
            f"{path}: truncated or not a Parquet file ({type(e).__name__}: {e}); it was probably "
            "being written when its process died. Move it aside to load the rest of the run."
        ) from None
    have = pq.read_schema(path).names
    missing = [c for c in COLUMNS if c not in have]
    if missing:
        raise RunDirError(f"{path}: not a stallscope event file (missing columns {missing})")


def _clock_offsets(info: RunInfo) -> pl.DataFrame | None:
    """Per rank: aligned = t + offset_a + slope * (t - t_a), from run.json's clock samples
    (offset to rank 0 measured at start and stop; see the collective tracing backend)."""
    rows = []
    for p in info.processes.values():
        samples = (p.get("clock") or {}).get("offsets") or []
        if not samples or not isinstance(p.get("rank"), int):
            continue
        a, b = samples[0], samples[-1]
        ta, oa = int(a["local_ns"]), int(a["offset_ns"])
        tb, ob = int(b["local_ns"]), int(b["offset_ns"])
        slope = (ob - oa) / (tb - ta) if tb != ta else 0.0
        rows.append(
            {"rank": p["rank"], "pid": p.get("pid", 0), "t_a": ta, "o_a": oa, "slope": slope}
        )
    if not rows:
        return None
    return pl.DataFrame(
        rows,
        schema={
            "rank": pl.Int32,
            "pid": pl.Int32,
            "t_a": pl.Int64,
            "o_a": pl.Int64,
            "slope": pl.Float64,
        },
    )


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
    paths = [p for ps in info.files.values() for p in ps]
    for p in paths:
        _check_file(p)
    # Per file, then concatenated: files of other writers (an older version, an importer) may
    # store kind / category as Categorical or Enum; each is cast to the schema on its own.
    casts = [pl.col(c).cast(t) for c, t in SCHEMA.items()]
    lf = pl.concat([pl.scan_parquet(p).select(casts) for p in paths], how="vertical")
    if align_clocks:
        offsets = _clock_offsets(info)
        if offsets is not None:
            # Processes of one rank share its host clock: join on rank only.
            per_rank = offsets.unique("rank", keep="first").drop("pid").lazy()
            shift = (
                (pl.col("o_a") + pl.col("slope") * (pl.col("start_ns") - pl.col("t_a")))
                .round()
                .cast(pl.Int64)
            )
            lf = (
                lf.join(per_rank, on="rank", how="left")
                .with_columns(shift=shift.fill_null(0))
                .with_columns(
                    start_ns=pl.col("start_ns") + pl.col("shift"),
                    end_ns=pl.col("end_ns") + pl.col("shift"),
                )
                .select(COLUMNS)
            )
    return lf


def load(run_dir: str | os.PathLike[str], *, align_clocks: bool = True) -> pl.DataFrame:
    """All ranks' events of a run directory as a DataFrame (see `scan`)."""
    return scan(run_dir, align_clocks=align_clocks).collect()
