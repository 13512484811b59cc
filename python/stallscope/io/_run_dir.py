"""The run directory: its file names (run.json's content lives in io/_run_json.py).

A run directory holds, per traced process:

- ``rank-NNNNN.parquet``: its events (one row group per flush), written when its trace stops.
- ``rank-NNNNN.part-MMMMMM.parquet``: while the trace runs, one complete Parquet file per flush
  (at most ``flush_interval`` apart). stop() merges them into ``rank-NNNNN.parquet`` and deletes
  them; after a SIGKILL they stay, every one readable, and `load` reads them.
- A traced process that is a fork()ed child of a traced process (a DataLoader worker that calls
  stallscope.trace itself) uses the stem ``rank-NNNNN.pid-PPPP``.

``run.json`` has one entry per process stem (see io/_run_json.py).
"""

from __future__ import annotations

import re
from pathlib import Path

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
