"""Perfetto / Chrome trace JSON: structure that ui.perfetto.dev's JSON importer relies on."""

from __future__ import annotations

import gzip
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

import stallscope
from stallscope._schema import conform
from stallscope.analysis import stall_table
from stallscope.io._perfetto import STALLS_TID, STEPS_TID, perfetto_json, write_perfetto

PHASES = {"X", "i", "C", "b", "e", "M"}


def events(rows: list[dict[str, Any]]) -> pl.DataFrame:
    base = {"name": "x", "detail": None, "lane": 11, "device": -1, "correlation": 0}
    return conform(pl.DataFrame([{**base, **r} for r in rows], infer_schema_length=None)).collect()


def sample() -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    for rank, skew in ((0, 0), (1, 5_000)):
        t = 1_000_000_000 + skew
        rows += [
            {"rank": rank, "kind": "step", "category": "host", "start_ns": t, "end_ns": t},
            {
                "rank": rank,
                "kind": "step",
                "category": "host",
                "start_ns": t + 100_000,
                "end_ns": t + 100_000,
                "correlation": 1,
            },
            {
                "rank": rank,
                "kind": "region",
                "category": "compute",
                "name": "forward",
                "start_ns": t + 1_000,
                "end_ns": t + 50_000,
            },
            {
                "rank": rank,
                "kind": "region",
                "category": "compute",
                "name": 'layer "1"',
                "start_ns": t + 1_000,
                "end_ns": t + 20_000,
            },  # same start: parent must come first
            {
                "rank": rank,
                "kind": "kernel",
                "category": "compute",
                "name": "gemm",
                "start_ns": t + 2_000,
                "end_ns": t + 30_001,
                "device": 0,
                "lane": 7,
            },
            {
                "rank": rank,
                "kind": "collective",
                "category": "comm",
                "name": "all_reduce",
                "start_ns": t + 60_000 - skew,
                "end_ns": t + 90_000 - skew,
                "detail": "group=g;group_size=2;nnodes=1",
            },
            {
                "rank": rank,
                "kind": "collective",
                "category": "comm",
                "name": "all_reduce",
                "start_ns": t + 70_000,
                "end_ns": t + 95_000,
                "correlation": 1,
                "detail": "group=g;group_size=2;nnodes=1",
            },  # overlaps the first: async
            {
                "rank": rank,
                "kind": "mark",
                "category": "host",
                "name": "ckpt",
                "start_ns": t + 99_000,
                "end_ns": t + 99_000,
            },
            {
                "rank": rank,
                "kind": "counter",
                "category": "host",
                "name": "mem",
                "start_ns": t + 10_000,
                "end_ns": t + 10_000,
                "value": 3.5,
            },
        ]
    rows.append(
        {
            "rank": 0,
            "kind": "region",
            "category": "host",
            "start_ns": 1_000_000_500,
            "end_ns": 1_000_000_400,
        }
    )  # negative duration: skipped and counted
    return events(rows)


def load(data: bytes) -> dict[str, Any]:
    doc = orjson.loads(data)
    assert isinstance(doc, dict)
    return doc


def test_required_fields_and_phases() -> None:
    doc = load(perfetto_json(sample()))
    assert doc["displayTimeUnit"] == "ns"
    assert doc["otherData"]["time_base_ns"] == 1_000_000_000
    assert doc["otherData"]["skipped_events"] == 1
    evs = doc["traceEvents"]
    assert {e["ph"] for e in evs} == PHASES
    for e in evs:
        assert isinstance(e["pid"], int)
        assert isinstance(e["name"], str)
        if e["ph"] != "M":
            assert isinstance(e["ts"], float | int)
            assert e["ts"] >= 0
        if e["ph"] in ("X", "i", "b", "e"):
            assert isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert e["dur"] >= 0
        if e["ph"] == "i":
            assert e["s"] == "t"
        if e["ph"] == "C":
            assert e["args"] == {"value": 3.5}
        if e["ph"] in ("b", "e"):
            assert isinstance(e["id"], str)
            assert e["cat"] == "collective"


def test_timestamps_are_microseconds_with_ns_precision_and_monotonic() -> None:
    evs = load(perfetto_json(sample()))["traceEvents"]
    body = [e for e in evs if e["ph"] != "M"]
    assert all(a["ts"] <= b["ts"] for a, b in pairwise(body))
    gemm = next(e for e in body if e["name"] == "gemm" and e["pid"] == 0)
    assert gemm["ts"] == 2.0
    assert gemm["dur"] == 28.001  # 28,001 ns
    # Metadata comes first.
    first_body = next(i for i, e in enumerate(evs) if e["ph"] != "M")
    assert all(e["ph"] != "M" for e in evs[first_body:])


def test_slices_nest_on_every_thread() -> None:
    evs = load(perfetto_json(sample()))["traceEvents"]
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in evs:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)
    assert tracks
    for track in tracks.values():
        stack: list[int] = []  # ends (ns) of the open slices, in file order
        for e in track:
            start = round(e["ts"] * 1000)  # as Perfetto reads µs: to whole ns
            end = start + round(e["dur"] * 1000)
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], f"{e} crosses its parent"
            stack.append(end)


def test_async_begin_end_pairs() -> None:
    evs = load(perfetto_json(sample()))["traceEvents"]
    opened: dict[tuple[int, str], float] = {}
    for e in evs:
        if e["ph"] == "b":
            opened[(e["pid"], e["id"])] = e["ts"]
        elif e["ph"] == "e":
            assert e["ts"] >= opened.pop((e["pid"], e["id"]))
    assert not opened


def test_process_per_rank_threads_per_lane_and_metadata() -> None:
    evs = load(perfetto_json(sample()))["traceEvents"]
    meta = [e for e in evs if e["ph"] == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert procs == {0: "rank 0", 1: "rank 1"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert threads[(0, STALLS_TID)] == "stalls"
    assert threads[(1, STEPS_TID)] == "steps"
    assert threads[(0, 11)] == "thread 11"
    assert "GPU 0 stream 7" in threads.values()
    used = {(e["pid"], e["tid"]) for e in evs if e["ph"] in ("X", "i")}
    assert used <= set(threads), "every thread that holds slices is named"


def test_stall_track_matches_stall_table() -> None:
    ev = sample()
    evs = load(perfetto_json(ev))["traceEvents"]
    got: dict[tuple[int, str], float] = defaultdict(float)
    for e in evs:
        if e["ph"] == "X" and e["tid"] == STALLS_TID:
            got[(e["pid"], e["name"])] += e["dur"]
    t = stall_table(ev)
    for r in t.iter_rows(named=True):
        for c in ("compute", "sync_wait", "interconnect", "host"):
            assert got[(r["rank"], c)] == pytest.approx(r[f"{c}_ns"] / 1000)
    assert got[(0, "sync_wait")] > 0, "rank 0 arrives first: it waits"
    steps = [e for e in evs if e["ph"] == "X" and e["tid"] == STEPS_TID]
    assert {(e["pid"], e["name"], e["dur"]) for e in steps} == {
        (0, "step 0", 100.0),
        (1, "step 0", 100.0),
    }


def test_names_are_escaped() -> None:
    evs = load(perfetto_json(sample()))["traceEvents"]
    assert any(e["name"] == 'layer "1"' for e in evs)


def test_no_stalls_and_empty() -> None:
    evs = load(perfetto_json(sample(), stalls=False))["traceEvents"]
    assert all(e.get("tid") not in (STALLS_TID, STEPS_TID) for e in evs)
    empty = conform(pl.DataFrame(schema=stallscope.SCHEMA)).collect()
    assert load(perfetto_json(empty))["traceEvents"] == []


def test_write_plain_and_gzip(tmp_path: Path) -> None:
    ev = sample()
    p = write_perfetto(ev, tmp_path / "t.json")
    z = write_perfetto(ev, tmp_path / "t.json.gz")
    assert load(p.read_bytes()) == load(gzip.decompress(z.read_bytes()))


def test_real_traced_run(tmp_path: Path) -> None:
    import time

    run = tmp_path / "run"
    with stallscope.trace(run):
        for _ in stallscope.loader(range(4), mark_steps=True):
            with (
                stallscope.region("forward", category="compute"),
                stallscope.region("layer", category="compute"),
            ):
                time.sleep(0.001)
    doc = load(perfetto_json(stallscope.load(run)))
    names = {e["name"] for e in doc["traceEvents"]}
    assert {"forward", "layer", "next_batch", "compute", "host", "process_name"} <= names


def test_imported_profiler_step_ranges() -> None:
    # Kineto-style: ProfilerStep#N ranges, GPU kernels, a collective with NCCL metadata.
    rows: list[dict[str, Any]] = [
        {
            "rank": 0,
            "kind": "step",
            "category": "host",
            "name": f"ProfilerStep#{n}",
            "start_ns": 1_000_000 * i,
            "end_ns": 1_000_000 * i + 900_000,
            "correlation": n,
        }
        for i, n in enumerate((4, 5, 6))
    ]
    rows += [
        {
            "rank": 0,
            "kind": "kernel",
            "category": "compute",
            "name": "gemm",
            "device": 0,
            "lane": 7,
            "start_ns": 100_000,
            "end_ns": 300_000,
        },
        {
            "rank": 0,
            "kind": "collective",
            "category": "comm",
            "name": "allreduce",
            "start_ns": 1_100_000,
            "end_ns": 1_400_000,
            "correlation": 1,
            "detail": "group=0:0,1;group_size=2;nnodes=1",
        },
    ]
    doc = load(perfetto_json(events(rows)))
    steps = sorted(
        e["name"] for e in doc["traceEvents"] if e.get("tid") == STEPS_TID and e["ph"] == "X"
    )
    assert steps == ["step 4", "step 5", "step 6"]
    assert {e["ph"] for e in doc["traceEvents"]} >= {"X", "b", "e", "M"}
