"""queue_length (NumPy joins on HTA's rows) against HTA's joins written in Polars, on generated
native events: launches whose GPU op was cut by the last-step filter, correlations shared by
several launches or ops, launches without one, ties in time, several ranks and streams."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st
from native_events import native_events  # type: ignore[import-not-found]

from stallscope.analysis import queue_length
from stallscope.analysis.hta._loading import hta_rows
from stallscope.analysis.hta._queue import LAUNCH_NAMES

rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(
            [
                ("runtime", "cudaLaunchKernel", False),
                ("runtime", "cudaMemcpyAsync", False),
                ("runtime", "cudaStreamSynchronize", False),
                ("region", "ProfilerStep#1", False),
                ("region", "ProfilerStep#2", False),
                ("kernel", "gemm", True),
                ("memcpy", "copy", True),
            ]
        ),
        st.integers(0, 1),  # rank
        st.integers(0, 3),  # correlation (0: none)
        st.integers(0, 12),  # start, µs (few values: ties)
        st.integers(0, 6),  # duration, µs
        st.sampled_from([7, 8]),  # stream of GPU rows
    ),
    max_size=30,
)


def _frame(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    """((kind, name, on GPU), rank, correlation, start µs, duration µs, stream) rows."""
    return native_events(
        (r, kind, name, ts, dur, stream if gpu else 11, corr)
        for (kind, name, gpu), r, corr, ts, dur, stream in rows
    )


def _polars_reference(events: pl.DataFrame) -> pl.DataFrame:
    """HTA's queue length as joins over hta_rows' frames."""
    rows = hta_rows(events, include_last_profiler_step=False)
    partners = hta_rows(events, include_last_profiler_step=True)
    has_gpu = (
        partners.filter(pl.col("is_gpu") & (pl.col("correlation") != -1))
        .select("rank", "correlation")
        .unique()
    )
    gpu = rows.filter(pl.col("stream") != -1)
    launches = rows.filter(pl.col("name").is_in(LAUNCH_NAMES) & ~pl.col("is_gpu")).join(
        has_gpu, on=["rank", "correlation"], how="semi", maintain_order="left"
    )
    up = (
        launches.select("rank", "correlation", "ts")
        .join(
            gpu.select("rank", "correlation", "stream").unique(
                subset=["rank", "correlation"], keep="last", maintain_order=True
            ),
            on=["rank", "correlation"],
            how="inner",
            maintain_order="left",
        )
        .with_columns(queue=pl.lit(1, pl.Int64))
    )
    down = gpu.join(
        launches.select("rank", "correlation"),
        on=["rank", "correlation"],
        how="semi",
        maintain_order="left",
    ).select("rank", "correlation", "ts", "stream", queue=pl.lit(-1, pl.Int64))
    series = (
        pl.concat([down, up.select(down.columns)])
        .sort("rank", "stream", "ts", maintain_order=True)
        .with_columns(queue_length=pl.col("queue").cum_sum().over("rank", "stream"))
    )
    return series.select(
        "rank",
        "stream",
        ts_ns=(pl.col("ts") * 1000.0).round(0).cast(pl.Int64),
        queue_length="queue_length",
    )


LAUNCH = ("runtime", "cudaLaunchKernel", False)
KERNEL = ("kernel", "gemm", True)


@settings(max_examples=300, deadline=None)
@given(rows_strategy)
# A launch whose correlation two ops share goes on the stream of the last of them.
@example([(LAUNCH, 0, 1, 5, 1, 7), (KERNEL, 0, 1, 5, 3, 7), (KERNEL, 0, 1, 9, 3, 8)])
# An op's start and a launch at the same time on one stream: the op's step comes first.
@example(
    [
        (LAUNCH, 0, 1, 0, 1, 7),
        (KERNEL, 0, 1, 5, 3, 7),
        (LAUNCH, 0, 2, 5, 1, 7),
        (KERNEL, 0, 2, 9, 3, 7),
    ]
)
def test_queue_length_is_htas_joins(rows: list[tuple[Any, ...]]) -> None:
    ev = _frame(rows)
    got = queue_length(ev)
    assert got.equals(_polars_reference(ev))


def test_a_launch_counts_when_its_op_was_cut_by_the_last_step_filter() -> None:
    """Rank 0's kernel launched in step 2 is dropped with its launch by the last-step filter,
    but the launch in step 1 whose kernel ran in step 2 still counts (its partner is found
    before the filter) and its kernel, kept as the launch's partner, takes it off again."""
    ev = _frame(
        [
            (("region", "ProfilerStep#1", False), 0, 0, 0, 10, 7),
            (("region", "ProfilerStep#2", False), 0, 0, 10, 10, 7),
            (("runtime", "cudaLaunchKernel", False), 0, 1, 2, 1, 7),
            (("kernel", "gemm", True), 0, 1, 12, 3, 7),
            (("runtime", "cudaLaunchKernel", False), 0, 2, 11, 1, 7),
            (("kernel", "gemm", True), 0, 2, 15, 3, 7),
        ]
    )
    got = queue_length(ev)
    assert got.select("stream", "queue_length").rows() == [(7, 1), (7, 0)]
    assert got["ts_ns"].to_list()[0] < got["ts_ns"].to_list()[1]
