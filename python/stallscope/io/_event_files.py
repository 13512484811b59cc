"""The event files of a run directory: Parquet settings, an atomic write, and the merge of a
trace's part files into its final file."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from stallscope.io._run_dir import final_path

# Parquet settings, chosen by CPU time per event on the CI VM (bench/core_capture.py): zstd level
# 1; dictionaries only for the string columns (Arrow's default also tries them on every int64
# column, costing a hash per value for nothing); delta encoding for the time and correlation
# columns (mostly increasing); statistics only where readers filter (time, rank). About 1.8x the
# default's throughput and 40 % smaller.
PARQUET_OPTIONS: dict[str, object] = {
    "compression": "zstd",
    "compression_level": 1,
    "use_dictionary": ["kind", "category", "name", "detail"],
    "write_statistics": ["rank", "start_ns", "end_ns"],
    "column_encoding": {c: "DELTA_BINARY_PACKED" for c in ("start_ns", "end_ns", "correlation")},
}


def write_atomic(table: pa.Table, path: Path) -> None:
    """Write `table` to `path` so that a reader never sees a half-written file."""
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, **PARQUET_OPTIONS)
    os.replace(tmp, path)


def merge_parts(out_dir: Path, stem: str, parts: list[Path]) -> Path | None:
    """Merge part files into the stem's final file (one row group per part), then delete them."""
    if not parts:
        return None
    final = final_path(out_dir, stem)
    tmp = final.with_name(f".{final.name}.tmp")
    first = pq.ParquetFile(parts[0])
    with pq.ParquetWriter(tmp, first.schema_arrow, **PARQUET_OPTIONS) as w:
        for p in parts:
            w.write_table(pq.read_table(p), row_group_size=1 << 30)
    os.replace(tmp, final)
    for p in parts:
        p.unlink(missing_ok=True)
    return final
