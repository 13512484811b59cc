"""The per-step summary is plain Parquet: a query engine reads it without stallscope."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest

import stallscope


def test_duckdb_reads_the_per_step_summary(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (pip install duckdb)")
    run = tmp_path / "run"
    for rank in (0, 1):
        with stallscope.trace(run, rank=rank, world_size=2, mode="continuous", flush_interval=0.05):
            fwd = stallscope.region("forward", category="compute")
            for _ in range(12):
                stallscope.step()
                with fwd:
                    time.sleep(0.002 * (1 + rank))
    files = str(run / "summary" / "*.parquet")
    got = duckdb.sql(
        f"""
        SELECT step, count(*) AS ranks, max(step_ns) AS step_max_ns,
               sum(compute_ns) AS compute_ns, arg_max(rank, step_ns) AS slowest
        FROM read_parquet('{files}')
        WHERE NOT arrivals_only
        GROUP BY step ORDER BY step
        """
    ).pl()
    s = stallscope.load_summary(run, align_clocks=False)
    want = (
        s.group_by("step")
        .agg(
            ranks=pl.len(),
            step_max_ns=pl.col("step_ns").max(),
            compute_ns=pl.col("compute_ns").sum(),
            slowest=pl.col("rank").sort_by("step_ns").last(),
        )
        .sort("step")
    )
    assert got.height == 12 and (got["ranks"] == 2).all()
    for c in ("step", "step_max_ns", "compute_ns", "slowest"):
        assert got[c].cast(pl.Int64).to_list() == want[c].cast(pl.Int64).to_list()
