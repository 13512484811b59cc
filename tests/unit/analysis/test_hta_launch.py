"""launch_stats (NumPy joins on HTA's rows) against HTA's join written in Polars, on generated
native events: launches sharing a correlation, GPU ops sharing one, launches and ops without
one (HTA's merge matches -1 with -1), memory launches, several ranks."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from native_events import US, native_events  # type: ignore[import-not-found]

from stallscope.analysis import launch_stats
from stallscope.analysis.hta._launch import LAUNCHES, MEMORY_LAUNCHES
from stallscope.analysis.hta._loading import hta_rows

COLUMNS = ["rank", "correlation", "cpu_duration_ns", "gpu_duration_ns", "launch_delay_ns"]

cpu_rows = st.tuples(
    st.sampled_from(["runtime", "region"]),
    st.sampled_from([*LAUNCHES[:1], *MEMORY_LAUNCHES, "cudaStreamSynchronize", "aten::mm"]),
)
gpu_rows = st.tuples(st.sampled_from(["kernel", "memcpy"]), st.sampled_from(["gemm", "copy"]))
events = st.lists(
    st.tuples(
        st.one_of(cpu_rows, gpu_rows),
        st.integers(0, 1),  # rank
        st.integers(0, 4),  # correlation (0: none)
        st.integers(0, 200),  # start, µs
        st.integers(0, 30),  # duration, µs
    ),
    max_size=30,
)


def _frame(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    """((kind, name), rank, correlation, start µs, duration µs) rows: GPU rows on stream 7."""
    return native_events(
        (r, kind, name, ts, dur, 7 if kind in ("kernel", "memcpy") else 11, corr)
        for (kind, name), r, corr, ts, dur in rows
    )


def _polars_reference(ev: pl.DataFrame, include_memory_events: bool) -> pl.DataFrame:
    """HTA's launch join over hta_rows' frame: launched keys, then CPU x GPU rows per key."""
    rows = hta_rows(ev)
    names = LAUNCHES + (MEMORY_LAUNCHES if include_memory_events else ())
    launched = rows.filter(pl.col("name").is_in(names)).select("rank", "correlation").unique()
    cpu = rows.filter(pl.col("stream") == -1).join(launched, on=["rank", "correlation"])
    gpu = rows.filter(pl.col("stream") != -1).join(launched, on=["rank", "correlation"])
    joined = cpu.select("rank", "correlation", "ts", "dur").join(
        gpu.select("rank", "correlation", "ts", "dur"), on=["rank", "correlation"], suffix="_gpu"
    )
    ns = 1000.0
    return joined.select(
        "rank",
        "correlation",
        cpu_duration_ns=(pl.col("dur") * ns).round(0).cast(pl.Int64),
        gpu_duration_ns=(pl.col("dur_gpu") * ns).round(0).cast(pl.Int64),
        launch_delay_ns=((pl.col("ts_gpu") - pl.col("ts") - pl.col("dur")).clip(lower_bound=0) * ns)
        .round(0)
        .cast(pl.Int64),
    )


@settings(max_examples=150, deadline=None)
@given(events, st.booleans())
def test_launch_stats_is_htas_join(rows: list[tuple[Any, ...]], memory: bool) -> None:
    ev = _frame(rows)
    got = launch_stats(ev, include_memory_events=memory)
    want = _polars_reference(ev, memory)
    assert got.columns == COLUMNS
    assert got.select("rank", "correlation").equals(
        got.select("rank", "correlation").sort("rank", "correlation")
    )
    assert got.sort(COLUMNS).equals(want.sort(COLUMNS), null_equal=True)


def test_launches_without_a_correlation_pair_with_every_op_without_one() -> None:
    """A launch without a correlation gives its rank the key -1, which every CPU row and every
    GPU op without a correlation share: HTA's merge pairs them all."""
    ev = _frame(
        [
            (("runtime", "cudaLaunchKernel"), 0, 0, 0, 2),
            (("region", "aten::mm"), 0, 0, 1, 5),
            (("kernel", "gemm"), 0, 0, 10, 4),
            (("runtime", "cudaLaunchKernel"), 0, 1, 20, 1),
            (("kernel", "gemm"), 0, 1, 30, 3),
            (("kernel", "gemm"), 1, 0, 10, 4),  # rank 1 has no launch without a correlation
        ]
    )
    got = launch_stats(ev)
    assert got.filter(pl.col("correlation") == -1).height == 2  # two CPU rows x one op
    assert got.filter(pl.col("correlation") == 1)["launch_delay_ns"].to_list() == [9 * US]
    assert got["rank"].to_list() == [0, 0, 0]
