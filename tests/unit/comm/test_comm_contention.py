"""The CPU-contention warning of `stallscope bench comm`: rows whose ranks waited on the run queue
for a large share of an operation's time are named; quiet rows and rows without the measurement
are not."""

from __future__ import annotations

from typing import Any

from stallscope.cli.bench import contention_warning, results_table


def _row(nbytes: int, time_ns: float, wait_ns: float | None) -> dict[str, Any]:
    return {
        "collective": "all_reduce",
        "tier": "inter_node",
        "place": "in",
        "group_size": 2,
        "nnodes": 2,
        "bytes": nbytes,
        "count": nbytes // 4,
        "dtype": "float32",
        "iters": 10,
        "time_ns": time_ns,
        "time_min_ns": time_ns,
        "time_max_ns": time_ns,
        "algbw_Bps": nbytes / (time_ns * 1e-9),
        "busbw_Bps": nbytes / (time_ns * 1e-9),
        "block_median_ns": time_ns,
        "runq_wait_ns": wait_ns,
    }


def test_quiet_rows_give_no_warning() -> None:
    rep = {"results": [_row(65536, 540_000, 5_000), _row(1 << 20, 8_400_000, None)]}
    assert contention_warning(rep) is None
    table = results_table(rep)
    assert table["cpu_wait_%"].to_list() == [0.9, None]


def test_the_worst_contended_size_is_named() -> None:
    rep = {
        "results": [
            _row(65536, 1_700_000, 1_000_000),  # 59 % of the time waiting for a CPU
            _row(262144, 2_400_000, 700_000),  # 29 %
            _row(1 << 20, 8_900_000, 100_000),
        ]
    }
    msg = contention_warning(rep)
    assert msg is not None
    assert "59 %" in msg and "64K" in msg and "--realtime" in msg
    assert contention_warning(rep, limit=0.6) is None
