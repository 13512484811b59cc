"""The native rank-local stall table (analysis/stall/_native.py, csrc/analysis/stall_sweep.cc)
and sync wait split (csrc/analysis/sync_split.cc) equal their Polars / NumPy references
exactly: on random events, on the real traces kept in the repository, and on a small run
directory made by the 1,024-rank benchmark's generator."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from test_stall_table_properties import event_sets, frame  # type: ignore[import-not-found]

import stallscope
from stallscope._schema import KINDS
from stallscope.analysis import stall_table, stream_run
from stallscope.analysis.stall._exposed import (
    LocalParts,
    local_parts,
    split_sync_wait,
    split_sync_wait_numpy,
)
from stallscope.analysis.stall._native import BadDetailError, native_local_parts

_ORDER = ["rank", "step", "start_ns"]


def _equal(got: LocalParts, want: LocalParts) -> None:
    assert_frame_equal(got.table, want.table)
    assert_frame_equal(got.exposed, want.exposed)
    assert_frame_equal(got.arrivals, want.arrivals)
    assert got.gpu == want.gpu
    assert got.multi.tolist() == want.multi.tolist()


def _check(ev: pl.DataFrame, gpu: bool = False, multi: list[int] | None = None) -> None:
    m = None if multi is None else np.array(multi, np.int32)
    want = local_parts(ev, gpu=gpu, multi=m)
    got = native_local_parts(ev, gpu=gpu, multi=m)
    _equal(got, want)
    if want.table.height and want.exposed.height and want.arrivals.height:
        args = (want.table, want.exposed, want.arrivals)
        assert_frame_equal(split_sync_wait(*args), split_sync_wait_numpy(*args))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(event_sets(), st.booleans(), st.sampled_from([None, [0], [1, 2]]))
def test_native_parts_equal_the_polars_ones(
    rows: list[dict[str, Any]], gpu: bool, multi: list[int] | None
) -> None:
    _check(frame(rows), gpu, multi)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(event_sets(cpu_comm=True))
def test_native_parts_equal_the_polars_ones_cpu_communication(rows: list[dict[str, Any]]) -> None:
    _check(frame(rows))


T = 200
_KINDS = {  # kind -> categories drawn
    "kernel": ["compute", "comm", "memcpy", "sync", None],
    "memcpy": ["memcpy"],
    "memset": ["memcpy"],
    "gpu_sync": ["sync"],
    "region": ["compute", "memcpy", "comm", "data", "data_fetch", "data_prep", "host", None],
    "data_wait": ["data"],
    "runtime": ["host"],
    "bucket": ["comm"],
    "collective": ["comm"],
    "p2p": ["comm"],
}


@st.composite
def busy_runs(draw: Any) -> list[dict[str, Any]]:
    """Many lanes, overlapping intervals, ranged and null-numbered step markers, steps with
    no events, collectives across steps, rows of ranks interleaved."""
    rows: list[dict[str, Any]] = []
    gpu = draw(st.booleans())
    kinds = [k for k in _KINDS if gpu or k not in ("kernel", "memcpy", "memset", "gpu_sync")]
    for r in range(draw(st.integers(1, 4))):
        marks = sorted(draw(st.lists(st.integers(0, T), max_size=6)))
        for i, t in enumerate(marks):
            ranged = draw(st.integers(0, 3)) == 0
            rows.append(
                {
                    "rank": r,
                    "kind": "step",
                    "category": "host",
                    "start_ns": t,
                    "end_ns": t + (draw(st.integers(1, 60)) if ranged else 0),
                    "correlation": None if draw(st.integers(0, 5)) == 0 else i,
                }
            )
        for _ in range(draw(st.integers(0, 30))):
            kind = draw(st.sampled_from(kinds))
            a = draw(st.integers(-10, T + 10))
            b = a + draw(st.integers(-2, 80))
            row: dict[str, Any] = {
                "rank": r,
                "kind": kind,
                "category": draw(st.sampled_from(_KINDS[kind])),
                "start_ns": a,
                "end_ns": b,
                "correlation": draw(st.integers(0, 3)),
                "lane": draw(st.sampled_from([0, 1, 2, 7, None])),
            }
            if kind in ("collective", "p2p"):
                g = draw(st.sampled_from(["g0", "g1", None]))
                parts = [f"group={g}"] if g else []
                parts += [f"group_size={draw(st.integers(1, 4))}"]
                nn = draw(st.sampled_from([1, 2, None]))
                parts += [f"nnodes={nn}"] if nn else []
                parts += [f"async={draw(st.integers(0, 1))}"] if draw(st.booleans()) else []
                row["detail"] = ";".join(parts)
                row["name"] = draw(st.sampled_from(["AllReduce", "AllGather", "", None]))
            if kind == "bucket":
                row["detail"] = draw(st.sampled_from([None, "last=1", "params=2;last=0"]))
            rows.append(row)
    order = draw(st.permutations(range(len(rows))))
    return [rows[i] for i in order]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(busy_runs())
def test_native_parts_equal_the_polars_ones_on_busy_runs(rows: list[dict[str, Any]]) -> None:
    ev = frame(rows)
    _check(ev)
    _check(ev, gpu=True)


def test_native_parts_of_the_kept_traces(kineto_data: Path) -> None:
    for name in ("h200_transformer_1rank", "hta_a100_rank0_of2_ncclmeta", "param_dlrm_8rank"):
        _check(stallscope.import_kineto(kineto_data / name))


def test_native_parts_drop_rows_without_rank_or_times_as_the_reference() -> None:
    rows = [
        {"rank": 0, "kind": "step", "category": "host", "start_ns": 0, "end_ns": 0},
        {"rank": 0, "kind": "step", "category": "host", "start_ns": 100, "end_ns": 100},
        {"rank": 0, "kind": "kernel", "category": "compute", "start_ns": 10, "end_ns": None},
        {"rank": None, "kind": "kernel", "category": "compute", "start_ns": 10, "end_ns": 50},
        {"rank": 0, "kind": "memcpy", "category": "memcpy", "start_ns": 20, "end_ns": 40},
    ]
    _check(frame(rows))


def test_a_bad_nnodes_is_named() -> None:
    rows = [
        {"rank": 0, "kind": "step", "category": "host", "start_ns": 0, "end_ns": 0},
        {"rank": 0, "kind": "step", "category": "host", "start_ns": 100, "end_ns": 100},
        {"rank": 0, "kind": "collective", "category": "comm", "start_ns": 10, "end_ns": 50,
         "detail": "group=g;nnodes=two"},
    ]  # fmt: skip
    with pytest.raises(BadDetailError, match="nnodes"):
        native_local_parts(frame(rows))


def test_every_kind_code_is_in_the_label_tables() -> None:
    rows = [
        {"rank": 0, "kind": k, "category": "host", "start_ns": 5 * i, "end_ns": 5 * i + 3}
        for i, k in enumerate(KINDS)
    ]
    rows += [{"rank": 0, "kind": "step", "category": "host", "start_ns": 0, "end_ns": 1000}]
    _check(frame(rows))


def _bench_generator() -> Any:
    path = Path(__file__).parents[3] / "bench" / "scale_1024.py"
    spec = importlib.util.spec_from_file_location("scale_1024", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["scale_1024"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_small_scale_run_streams_natively_to_the_reference(tmp_path: Path) -> None:
    gen = _bench_generator()
    run = tmp_path / "run"
    run.mkdir()
    ranks, steps = 16, 4  # two nodes of 8: the world group's all-reduces cross the network
    gen._write_ranks((run, list(range(ranks)), ranks, steps, gen.timing(ranks, steps)))
    gen.write_run_json(run, ranks, steps)
    events = stallscope.load(run)
    _check(events)
    got = stream_run(run, ranks_per_batch=5)
    want = split_sync_wait_numpy(*_parts(local_parts(events)))
    assert_frame_equal(got.table.sort(_ORDER), want.sort(_ORDER))
    assert_frame_equal(got.table, stall_table(events))
    assert got.table["sync_wait_ns"].sum() > 0  # the stragglers' ranks make the others wait


def _parts(p: LocalParts) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    return p.table, p.exposed, p.arrivals


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(busy_runs())
def test_large_frames_take_the_native_table(rows: list[dict[str, Any]]) -> None:
    from stallscope.analysis.stall import _table

    ev = frame(rows)
    want = _table.stall_table_polars(ev)
    native, _table.NATIVE_ROWS = _table.NATIVE_ROWS, 0  # every frame counts as large
    try:
        got = stall_table(ev)
    finally:
        _table.NATIVE_ROWS = native
    assert_frame_equal(got, want)
