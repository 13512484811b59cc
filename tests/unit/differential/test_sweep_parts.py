"""What the sweep reads from a run's trace: the backward pass's time, the DDP buckets."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from stallscope._schema import conform
from stallscope.differential import backward_ns, bucket_sizes
from stallscope.exceptions import AnalyzeError


def _events(with_backward: bool = True) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    for r in (0, 1):
        for i in range(6):  # 6 markers: 5 windows, the last one a closing window
            t = i * 100
            rows.append({"rank": r, "kind": "step", "start_ns": t, "end_ns": t, "correlation": i})
            if i == 5:
                continue
            if with_backward:
                rows.append(
                    {
                        "rank": r,
                        "kind": "region",
                        "name": "backward",
                        "category": "compute",
                        "start_ns": t + 10,
                        "end_ns": t + 30 + i,
                    }
                )
            for j, size in enumerate((4000 + i, 1000)):  # launch order: the last layers first
                rows.append(
                    {
                        "rank": r,
                        "kind": "bucket",
                        "category": "comm",
                        "bytes": size,
                        "correlation": j,
                        "start_ns": t + 20 + 5 * j,
                        "end_ns": t + 60,
                    }
                )
    base = {"name": "x", "category": "host", "correlation": 0, "bytes": 0}
    return conform(pl.DataFrame([{**base, **r} for r in rows])).collect()


def test_backward_time_of_the_measured_steps() -> None:
    # windows 0..4; warm-up 2 and the last window out: steps 2 and 3 -> 22 and 23 ns
    assert backward_ns(_events(), warmup=2) == pytest.approx(22.5)


def test_buckets_of_the_last_measured_step_in_launch_order() -> None:
    assert bucket_sizes(_events(), warmup=2) == [4003, 1000]
    assert bucket_sizes(_events().filter(pl.col("kind") != "bucket"), warmup=2) == []


def test_no_backward_region_is_named() -> None:
    with pytest.raises(AnalyzeError, match=r"no 'backward' region .*stallscope\.region"):
        backward_ns(_events(with_backward=False), warmup=1)
