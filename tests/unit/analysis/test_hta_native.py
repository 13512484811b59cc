"""The HTA views on a native capture (no Kineto trace mark): times are ns, rounded as HTA rounds
an ns-resolution export (start up, end down, to whole µs)."""

from __future__ import annotations

import math

import polars as pl

from stallscope._schema import conform
from stallscope.analysis import (
    comm_comp_overlap,
    idle_time_breakdown,
    kernel_type_breakdown,
    launch_stats,
    temporal_breakdown,
)

US = 1000


def _events() -> pl.DataFrame:
    rows = [
        # kind, name, start µs, end µs, lane, correlation
        ("runtime", "cudaLaunchKernel", 0, 2, 11, 1),
        ("runtime", "cudaLaunchKernel", 3, 5, 11, 2),
        ("runtime", "cudaLaunchKernel", 60, 61, 11, 3),
        ("kernel", "gemm", 10, 20, 7, 1),
        ("kernel", "ncclDevKernel_AllReduce_Sum_f32", 15, 40, 8, 2),
        ("kernel", "gemm", 70, 80, 7, 3),
    ]
    return conform(
        pl.DataFrame(
            {
                "kind": [r[0] for r in rows],
                "name": [r[1] for r in rows],
                "start_ns": [r[2] * US for r in rows],
                "end_ns": [r[3] * US for r in rows],
                "lane": [r[4] for r in rows],
                "correlation": [r[5] for r in rows],
                "device": [0 if r[0] == "kernel" else -1 for r in rows],
            }
        )
    ).collect()


def test_temporal_breakdown_by_hand() -> None:
    row = temporal_breakdown(_events()).row(0, named=True)
    # GPU busy [10,40] and [70,80] in a 70 µs span: idle 30, compute 20, the rest (comm) 20.
    assert row["kernel_time_ns"] == 70 * US
    assert row["idle_time_ns"] == 30 * US
    assert row["compute_time_ns"] == 20 * US
    assert row["non_compute_time_ns"] == 20 * US
    assert (row["idle_pct"], row["compute_pct"], row["non_compute_pct"]) == (42.86, 28.57, 28.57)


def test_overlap_kernel_types_idle_and_launches_by_hand() -> None:
    ev = _events()
    ov = comm_comp_overlap(ev).row(0, named=True)
    assert ov["overlap_ns"] == 5 * US  # gemm [10,20] under the all-reduce [15,40]
    assert math.isclose(ov["overlap_pct"], 20.0)
    types = dict(kernel_type_breakdown(ev).select("kernel_type", "time_ns").iter_rows())
    assert types == {
        "COMPUTATION": 15 * US,
        "COMMUNICATION": 20 * US,
        "COMPUTATION overlapping COMMUNICATION": 5 * US,
    }
    idle = idle_time_breakdown(ev)
    s7 = dict(
        idle.filter(pl.col("stream") == 7).select("idle_category", "idle_time_ns").iter_rows()
    )
    # stream 7: gap 20 -> 70; its kernel's launch (60 µs) came after the stream drained (20 µs).
    assert s7 == {"host_wait": 50 * US, "other": 0}
    launches = launch_stats(ev).sort("correlation")
    assert launches["launch_delay_ns"].to_list() == [8 * US, 10 * US, 9 * US]
    assert launches["cpu_duration_ns"].to_list() == [2 * US, 2 * US, 1 * US]
