"""idle_by_cause: idle_time_breakdown's rows, one row per rank and stream."""

from __future__ import annotations

import polars as pl

from stallscope.analysis.hta._idle import idle_by_cause


def test_one_row_per_stream_in_cause_order_ms_and_zeros() -> None:
    rows = pl.DataFrame(
        {
            "rank": [1, 0, 0, 0],
            "stream": [7, 7, 7, 9],
            "idle_category": ["other", "other", "host_wait", "kernel_wait"],
            "idle_time_ns": [4_000_000, 1_500_000, 2_000_000, 500_000],
            "idle_time_ratio": [1.0, 0.4, 0.6, 1.0],
        },
        schema_overrides={"rank": pl.Int32},
    )
    wide = idle_by_cause(rows)
    assert wide.columns == ["rank", "stream", "host_wait", "kernel_wait", "other"]
    assert wide.rows() == [
        (0, 7, 2.0, 0.0, 1.5),
        (0, 9, 0.0, 0.5, 0.0),
        (1, 7, 0.0, 0.0, 4.0),
    ]


def test_only_the_causes_present() -> None:
    rows = pl.DataFrame(
        {"rank": [0], "stream": [7], "idle_category": ["other"], "idle_time_ns": [1_000_000]}
    )
    assert idle_by_cause(rows).columns == ["rank", "stream", "other"]
