"""The collective rule (`io/kineto/_collectives.py`, NumPy, used by both readers) against the same
rule written as Polars queries (`collective_oracle.py`): on the real NCCL traces and on
generated events with nested operations, equal starts, shared correlations, several ranks and
threads, and every null in the metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from collective_oracle import collective_events as oracle  # type: ignore[import-not-found]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from stallscope._schema import COLUMNS
from stallscope.io.kineto import _parse
from stallscope.io.kineto._collectives import collective_events
from stallscope.io.kineto._convert import convert

_PRIVATE = {
    "_i": pl.Int64,
    "_coll": pl.String,
    "_group_size": pl.Int64,
    "_in_nelems": pl.Int64,
    "_out_nelems": pl.Int64,
    "_dtype": pl.String,
    "_pg": pl.String,
    "_pg_desc": pl.String,
    "_pg_ranks": pl.String,
}


def _converted(path: Path) -> pl.DataFrame:
    """The general reader's converted events of one file (with the private NCCL columns)."""
    frame, _ = _parse.parse_owned([_parse.read_bytes(path)], path)
    events, _ = convert(frame, rank=0, base_ns=0, problems={})
    return events


@pytest.mark.parametrize(
    "name", ["hta_a100_rank0_of2_ncclmeta", "param_dlrm_8rank", "hta_sampled_2rank"]
)
def test_real_traces_match_the_oracle(kineto_data: Path, name: str) -> None:
    paths = sorted((kineto_data / name).glob("*.json*"))[:2]
    found = 0
    for p in paths:
        ev = _converted(p)
        got = collective_events(ev)
        assert_frame_equal(got, oracle(ev))
        found += got.height
    if name == "hta_a100_rank0_of2_ncclmeta":
        assert found == 21  # the trace's 21 NCCL operations (allreduce and others)


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema: dict[str, Any] = {
        "rank": pl.Int32,
        "pid": pl.Int32,
        "kind": pl.String,
        "category": pl.String,
        "name": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "lane": pl.Int32,
        "device": pl.Int16,
        "correlation": pl.Int64,
        "bytes": pl.Int64,
        "value": pl.Float64,
        "detail": pl.String,
        **_PRIVATE,
    }
    assert list(schema)[: len(COLUMNS)] == list(COLUMNS)
    full = [{k: r.get(k) for k in schema} for r in rows]
    return pl.DataFrame(full, schema=schema)


# Few threads, times and correlations: launches at an operation's start or end, operations
# with equal starts and nested ones, correlations shared by several kernels, all come often.
_thread = st.fixed_dictionaries(
    {"rank": st.integers(0, 1), "pid": st.integers(1, 2), "lane": st.just(1) | st.integers(1, 2)}
)
_op = st.builds(
    lambda th, start, dur, is_op, coll, gs, nel, dt, pg, desc, ranks: {
        **th,
        "kind": "region",
        "category": "host",
        "name": "record_param_comms" if is_op else "nccl:all_reduce",
        "start_ns": start,
        "end_ns": start + dur,
        "_coll": coll,
        "_group_size": gs,
        "_in_nelems": nel,
        "_dtype": dt,
        "_pg": pg,
        "_pg_desc": desc,
        "_pg_ranks": ranks,
    },
    _thread,
    st.integers(0, 12),
    st.integers(0, 12),
    st.booleans() | st.just(True),
    st.sampled_from([None, "allreduce", "send", "Recv", "_recv", "wait", "", "a;b", "broadcast"]),
    st.sampled_from([None, 2, 8]),
    st.sampled_from([None, 0, 5, -3, 1000]),
    st.sampled_from([None, "Float", "BFloat16", "x=y", "Double"]),
    st.sampled_from([None, "0", "1;x", "pg=2"]),
    st.sampled_from([None, "default_pg", "a=b"]),
    st.sampled_from([None, "[0, 1]", "[0,1]", "[]", "[ 3 ]"]),
)
_runtime = st.builds(
    lambda th, start, corr: {
        **th,
        "kind": "runtime",
        "category": "host",
        "name": "cudaLaunchKernel",
        "start_ns": start,
        "end_ns": start + 1,
        "correlation": corr,
    },
    _thread,
    st.integers(0, 14),
    st.integers(0, 3),
)
_kernel = st.builds(
    lambda rank, corr, start, dur, comm: {
        "rank": rank,
        "pid": 0,
        "lane": 7,
        "kind": "kernel",
        "category": "comm" if comm else "compute",
        "name": "ncclKernel",
        "start_ns": start,
        "end_ns": start + dur,
        "correlation": corr,
    },
    st.integers(0, 1),
    st.integers(0, 3),
    st.integers(0, 200),
    st.integers(0, 50),
    st.booleans() | st.just(True),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_op, max_size=8),
    st.lists(_runtime, max_size=10),
    st.lists(_kernel, max_size=10),
    st.randoms(use_true_random=False),
)
def test_generated_events_match_the_oracle(
    ops: list[dict[str, Any]],
    runtime: list[dict[str, Any]],
    kernels: list[dict[str, Any]],
    rnd: Any,
) -> None:
    rows = ops + runtime + kernels
    rnd.shuffle(rows)
    for i, r in enumerate(rows):
        r.update(_i=i, device=-1, bytes=0, detail="cat=x")
        r.setdefault("correlation", 0)
    ev = _frame(rows)
    assert_frame_equal(collective_events(ev), oracle(ev))


def _rows(*rows: dict[str, Any]) -> pl.DataFrame:
    out = []
    for i, r in enumerate(rows):
        base = {"rank": 0, "pid": 1, "lane": 1, "category": "host", "correlation": 0}
        out.append({**base, **r, "_i": i, "device": -1, "bytes": 0, "detail": "cat=x"})
    return _frame(out)


def _op(start: int, end: int, coll: str = "allreduce") -> dict[str, Any]:
    return {"kind": "region", "name": "record_param_comms", "start_ns": start, "end_ns": end,
            "_coll": coll}  # fmt: skip


def _launch(at: int, corr: int) -> list[dict[str, Any]]:
    return [
        {"kind": "runtime", "name": "cudaLaunchKernel", "start_ns": at, "end_ns": at + 1,
         "correlation": corr},
        {"kind": "kernel", "category": "comm", "name": "ncclKernel", "lane": 7,
         "start_ns": 100 * corr, "end_ns": 100 * corr + 50, "correlation": corr},
    ]  # fmt: skip


def test_a_launch_at_the_start_or_end_of_an_operation_is_its_own() -> None:
    ev = _rows(_op(5, 10), _op(20, 30, "broadcast"), *_launch(5, 1), *_launch(30, 2))
    got = collective_events(ev)
    assert got["start_ns"].to_list() == [100, 200]
    assert got["end_ns"].to_list() == [150, 250]
    assert_frame_equal(got, oracle(ev))


def test_nested_and_equal_starts_go_to_the_latest_row() -> None:
    # An outer operation holding an inner one, and two operations that start together: the
    # launch belongs to the latest-starting one, of equal starts the later row.
    ev = _rows(_op(0, 50), _op(10, 20, "send"), *_launch(12, 1), _op(60, 70), _op(60, 65, "recv"),
               *_launch(60, 2), *_launch(25, 3))  # fmt: skip
    got = collective_events(ev)
    assert got.select("name", "start_ns", "kind").rows() == [
        ("allreduce", 0, "collective"),  # the launch at 25 is past the inner one's end
        ("send", 100, "p2p"),
        ("allreduce", 60, "collective"),
        ("recv", 200, "p2p"),
    ]
    assert_frame_equal(got, oracle(ev))
