"""Events frames for the analysis tests, from short rows (a native capture: no trace mark)."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from stallscope._schema import GPU_KINDS, conform

US = 1000


def native_events(rows: Iterable[tuple[int, str, str, int, int, int, int]]) -> pl.DataFrame:
    """(rank, kind, name, start µs, duration µs, lane, correlation) per row, as the frame
    `stallscope.load` gives: GPU kinds on device 0, the rest on none."""
    rows = list(rows)
    return conform(
        pl.DataFrame(
            {
                "rank": [r[0] for r in rows],
                "kind": [r[1] for r in rows],
                "name": [r[2] for r in rows],
                "start_ns": [r[3] * US for r in rows],
                "end_ns": [(r[3] + r[4]) * US for r in rows],
                "lane": [r[5] for r in rows],
                "correlation": [r[6] for r in rows],
                "device": [0 if r[1] in GPU_KINDS else -1 for r in rows],
            },
            schema={
                "rank": pl.Int32,
                "kind": pl.String,
                "name": pl.String,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "lane": pl.Int32,
                "correlation": pl.Int64,
                "device": pl.Int16,
            },
        )
    ).collect()
