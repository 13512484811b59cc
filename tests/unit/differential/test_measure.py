"""A run in figures: measured steps (warm-up and the last window out), the trimmed mean over
their middle, batch sizes, page-cache marks."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from stallscope._schema import conform
from stallscope.analysis import STALL_COLUMNS
from stallscope.differential import measured_steps, run_summary, samples_per_step, trimmed_steps
from stallscope.exceptions import AnalyzeError


def events(rows: list[dict[str, Any]]) -> pl.DataFrame:
    base = {"correlation": 0, "detail": None, "lane": 1, "value": None, "category": "host"}
    return conform(pl.DataFrame([{**base, **r} for r in rows], infer_schema_length=None)).collect()


def run(
    ranks: int, step_ms: list[float], data_ms: float = 2.0, batch: int | None = 8
) -> pl.DataFrame:
    """Per rank: steps of the given lengths, each starting with a data wait of data_ms and
    computing the rest, a batch_samples counter per step, and a closing window of 1 ms."""
    rows: list[dict[str, Any]] = []
    for r in range(ranks):
        t = 0
        for i, ms in enumerate([*step_ms, 1.0]):
            rows.append(
                {
                    "rank": r,
                    "kind": "step",
                    "name": "step",
                    "start_ns": t,
                    "end_ns": t,
                    "correlation": i + 1,
                }
            )
            if i < len(step_ms):
                d = int(data_ms * 1e6)
                rows.append(
                    {
                        "rank": r,
                        "kind": "data_wait",
                        "name": "next_batch",
                        "category": "data",
                        "start_ns": t,
                        "end_ns": t + d,
                    }
                )
                rows.append(
                    {
                        "rank": r,
                        "kind": "region",
                        "name": "fwd",
                        "category": "compute",
                        "start_ns": t + d,
                        "end_ns": t + int(ms * 1e6),
                    }
                )
                if batch is not None:
                    rows.append(
                        {
                            "rank": r,
                            "kind": "counter",
                            "name": "batch_samples",
                            "start_ns": t,
                            "end_ns": t,
                            "value": float(batch),
                        }
                    )
            t += int(ms * 1e6)
        rows.append(
            {
                "rank": r,
                "kind": "step",
                "name": "step",
                "start_ns": t,
                "end_ns": t,
                "correlation": len(step_ms) + 2,
            }
        )
    return events(rows)


def test_measured_steps_drop_warmup_and_the_last_window() -> None:
    from stallscope.analysis import stall_table

    table = stall_table(run(2, [10, 10, 10, 10, 10]))
    assert table.height == 2 * 6
    kept = measured_steps(table, 2)
    assert kept["step"].to_list() == [3, 4, 5, 3, 4, 5]
    with pytest.raises(AnalyzeError, match="warm-up must be >= 0"):
        measured_steps(table, -1)


def test_trimmed_mean_leaves_out_the_extremes_and_still_sums() -> None:
    times = [10, 10, 50, 12, 14, 16, 18, 20, 22, 24, 26, 5]  # one spike, one fast step
    s = run_summary(run(2, times, data_ms=3.0), warmup=2, trim=0.2).row(0, named=True)
    # measured: 50, 12, ..., 26, 5 (10 steps): trimmed 2 each end: 14 .. 24 (6 steps)
    assert s["ranks"] == 2 and s["steps"] == 10
    assert s["step_ns"] == pytest.approx(19e6)
    assert s["data_ns"] == pytest.approx(3e6) and s["compute_ns"] == pytest.approx(16e6)
    assert sum(s[c] for c in STALL_COLUMNS) == pytest.approx(s["step_ns"])
    assert s["samples_per_step"] == 8.0 and s["step_cv"] > 0.4
    whole = run_summary(run(1, times), warmup=2, trim=0.0).row(0, named=True)
    assert whole["step_ns"] == pytest.approx(sum(times[2:]) / 10 * 1e6)


def test_trimmed_steps_keep_at_least_one_step() -> None:
    from stallscope.analysis import stall_table

    kept = measured_steps(stall_table(run(1, [9, 5, 7])), 0)
    assert trimmed_steps(kept, 0.4)["step"].to_list() == [3]  # the median step
    two = measured_steps(stall_table(run(1, [5, 7])), 0)
    assert trimmed_steps(two, 0.49)["step"].to_list() == [1, 2]  # too few to trim
    with pytest.raises(AnalyzeError, match="trim must be in"):
        trimmed_steps(kept, 0.5)


def test_samples_unknown_without_counters() -> None:
    ev = run(1, [5, 5, 5], batch=None)
    assert samples_per_step(ev) is None
    assert run_summary(ev, warmup=0)["samples_per_step"].to_list() == [None]


def test_runs_without_steps_or_with_too_few_say_what_to_do() -> None:
    no_steps = events([{"rank": 0, "kind": "region", "name": "x", "start_ns": 0, "end_ns": 5}])
    with pytest.raises(AnalyzeError, match=r"no step markers: wrap .*stallscope\.data\.synthetic"):
        run_summary(no_steps)
    with pytest.raises(AnalyzeError, match=r"2 step window.*none left after 3 warm-up"):
        run_summary(run(1, [5]), warmup=3)
