"""A Kineto import written as a native run directory (rank-NNNNN.parquet + run.json), so every
other command reads it like a traced run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from stallscope.io import _run_json as run_json
from stallscope.io._event_files import write_atomic
from stallscope.io._run_dir import final_path, stem_for


def write_run(imp: Any, out: Path) -> list[Path]:
    """Write a KinetoImport as a run directory; the written event files."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rank, meta in imp.ranks.items():
        stem = stem_for(rank)
        path = final_path(out, stem)
        events = imp.events.filter(pl.col("rank") == rank)
        write_atomic(events.to_arrow(), path)
        written.append(path)
        entry = run_json.imported(
            meta,
            rank=rank,
            pid=int(events["pid"].mode().first() or 0) if events.height else 0,
            events_written=events.height,
            steps=events.filter(pl.col("kind") == "step").height,
            file=path.name,
        )
        run_json.update_process(out, stem, entry)
    return written
