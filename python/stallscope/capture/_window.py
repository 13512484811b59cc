"""The rolling window of full events a continuous trace keeps on disk.

The writer writes a part file per flush interval as always; the window deletes the part files
that fell out of it. The window is the last ``window_steps`` complete steps and the one in
progress (from the start of the (window_steps + 1)-th latest step marker), but never longer than
``window_s`` seconds back from now; either may be left out (None). A part file is deleted once every event in it ended before the
window's start, so the events kept always cover the whole window.

Bound: a part holds the events drained during one flush interval F, so the parts on disk cover
at most the window's duration W (window_s, or window_steps x the step time) plus one F, and one
more F of events waits in memory for the next part. At an event rate R (events/s) and b bytes
per event in a part file (zstd Parquet; bench/continuous_bound.py measures b), the event files
hold at most about (W + F) x R x b bytes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stallscope._schema import KIND_ID


@dataclass
class _Part:
    path: Path
    max_end_ns: int
    rows: int
    nbytes: int


class Window:
    """Which part files a continuous trace keeps (see the module docstring)."""

    def __init__(self, window_steps: int | None, window_s: float | None) -> None:
        self.window_steps = window_steps
        self.window_ns = None if window_s is None else int(window_s * 1e9)
        self._parts: deque[_Part] = deque()
        # the latest window_steps + 1 markers' starts: the last complete steps and the open one
        self._steps: deque[int] = deque(maxlen=(window_steps or 0) + 1)
        self.deleted_parts = 0
        self.deleted_events = 0
        self.deleted_bytes = 0
        self.peak_bytes = 0  # the most bytes of part files kept at once
        self.peak_events = 0

    def observe(self, table: pa.Table) -> None:
        """Note the step markers of a drained chunk (in drain order)."""
        # The writer's kind column: dictionary codes in KINDS' order (capture/_writer.py).
        codes = table.column("kind").combine_chunks().indices.to_numpy(zero_copy_only=False)
        at = np.flatnonzero(codes == KIND_ID["step"])
        if at.size:
            starts = table.column("start_ns").to_numpy()[at]
            self._steps.extend(int(s) for s in np.sort(starts))

    def add_part(self, path: Path, table: pa.Table) -> None:
        end = pc.max(table.column("end_ns")).as_py()
        self._parts.append(_Part(path, int(end), table.num_rows, path.stat().st_size))
        held = sum(p.nbytes for p in self._parts)
        self.peak_bytes = max(self.peak_bytes, held)
        self.peak_events = max(self.peak_events, sum(p.rows for p in self._parts))

    def start_ns(self, now_ns: int) -> int | None:
        """The window's start now; None while it reaches back before the first part."""
        starts = []
        if self.window_steps is not None and len(self._steps) > self.window_steps:
            starts.append(self._steps[0])
        if self.window_ns is not None:
            starts.append(now_ns - self.window_ns)
        if not starts:
            return None
        # the last N steps, but never more than T seconds: the later of the two starts; with
        # steps configured but fewer than N seen, only the time limit applies
        return max(starts)

    def expire(self, now_ns: int) -> list[Path]:
        """Delete the parts whose events all ended before the window's start; returns them."""
        start = self.start_ns(now_ns)
        gone: list[Path] = []
        if start is None:
            return gone
        while self._parts and self._parts[0].max_end_ns < start:
            p = self._parts.popleft()
            p.path.unlink(missing_ok=True)
            self.deleted_parts += 1
            self.deleted_events += p.rows
            self.deleted_bytes += p.nbytes
            gone.append(p.path)
        return gone

    def stats(self) -> dict[str, Any]:
        return {
            "window_steps": self.window_steps,
            "window_s": None if self.window_ns is None else self.window_ns / 1e9,
            "parts_kept": len(self._parts),
            "bytes_kept": sum(p.nbytes for p in self._parts),
            "parts_deleted": self.deleted_parts,
            "events_deleted": self.deleted_events,
            "bytes_deleted": self.deleted_bytes,
            "peak_bytes_on_disk": self.peak_bytes,
            "peak_events_on_disk": self.peak_events,
        }
