"""Bad Kineto input: a clear TraceImportError, or rows dropped and counted in a
StallscopeWarning; never a crash. Plus the variants of kineto-and-hta.md section 8."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import stallscope
from stallscope import StallscopeWarning, TraceImportError
from stallscope._schema import SCHEMA


def kernel(
    ts: Any, dur: Any = 5, corr: int = 1, stream: int = 7, name: str = "gemm"
) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": corr, "External id": corr},
    }


def launch(ts: Any, corr: int = 1, dur: Any = 3) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 10,
        "tid": 11,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "External id": corr},
    }


def write(path: Path, doc: Any, *, gz: bool = False) -> Path:
    raw = json.dumps(doc).encode()
    if gz:
        path = path.with_suffix(".json.gz")
        path.write_bytes(gzip.compress(raw))
    else:
        path.write_bytes(raw)
    return path


def trace(events: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, **top, "traceEvents": events}


def test_minimal_trace(tmp_path: Path) -> None:
    p = write(
        tmp_path / "t.json",
        trace([launch(100), kernel(110)], distributedInfo={"rank": 2, "world_size": 4}),
    )
    ev = stallscope.import_kineto(p)
    assert dict(ev.schema) == SCHEMA
    k = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (k["rank"], k["start_ns"], k["end_ns"], k["lane"], k["device"], k["correlation"]) == (
        2,
        110_000,
        115_000,
        7,
        0,
        1,
    )
    assert k["category"] == "compute"


def test_file_name_with_detail_separators(tmp_path: Path) -> None:
    """A file named with ';' and '=' (the detail's separators) keeps every mark fact readable."""
    from stallscope._schema import detail_value
    from stallscope.io.kineto import TRACE_MARK

    p = write(tmp_path / "run;rank=2.json", trace([launch(100), kernel(110)]))
    ev = stallscope.import_kineto(p)
    detail = ev.filter(pl.col("name") == TRACE_MARK)["detail"].item()
    assert detail_value(detail, "file") == "run_rank_2.json"
    assert detail_value(detail, "source") == "kineto"
    assert detail_value(detail, "ts_float") == "0"


def test_malformed_json(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text('{"traceEvents": [{"ph": "X", "ts": 1,')
    with pytest.raises(TraceImportError, match=r"bad\.json: not valid JSON"):
        stallscope.import_kineto(p)


def test_truncated_gzip(tmp_path: Path) -> None:
    p = write(tmp_path / "t.json", trace([launch(100), kernel(110)] * 50), gz=True)
    assert stallscope.import_kineto(p).filter(pl.col("kind") == "kernel").height == 50
    p.write_bytes(p.read_bytes()[:-30])
    with pytest.raises(TraceImportError, match="truncated gzip"):
        stallscope.import_kineto(p)


def _large_gz(path: Path) -> Path:
    """A gzip'd trace over 1 MiB compressed (the reader gunzips those in a thread)."""
    import random

    rnd = random.Random(7)
    events = [
        kernel(i, corr=i, name=f"k{rnd.getrandbits(128):032x}{rnd.getrandbits(128):032x}")
        for i in range(40_000)
    ]
    p = write(path, trace(events, distributedInfo={"rank": 0}), gz=True)
    assert p.stat().st_size > 1 << 20
    return p


def test_nccl_metadata_of_dropped_events(tmp_path: Path) -> None:
    """record_param_comms rows that are dropped (no dur) leave no collective behind, also when
    nothing else of the file is kept (found by the mutation fuzz)."""
    op = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "record_param_comms",
        "pid": 1,
        "tid": 1,
        "ts": 5,
        "args": {"Collective name": "allreduce", "In msg nelems": 4, "dtype": "Float"},
    }
    alone = write(tmp_path / "alone.json", trace([op]))
    with pytest.warns(StallscopeWarning, match="without 'dur'"):
        ev = stallscope.import_kineto(alone)
    assert ev.filter(pl.col("kind").is_in(["collective", "p2p"])).height == 0
    kept = {**op, "ts": 9, "dur": 2}
    both = write(tmp_path / "both.json", trace([op, kernel(1), kept]))
    with pytest.warns(StallscopeWarning, match="without 'dur'"):
        ev = stallscope.import_kineto(both)
    assert ev.filter(pl.col("kind") == "collective")["start_ns"].to_list() == [9000]


@pytest.mark.parametrize("thread", [True, False])
def test_large_gzip_read_in_a_thread_and_its_truncation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread: bool
) -> None:
    from stallscope.io.kineto import _native_read

    # With a gunzip thread (machines of 3+ cores) and without (the scanner's second thread
    # reads on while this one gunzips).
    monkeypatch.setattr(_native_read, "_GUNZIP_THREAD_CORES", 0 if thread else 1 << 20)
    p = _large_gz(tmp_path / "big.json")
    ev = stallscope.import_kineto(p)
    assert ev.filter(pl.col("kind") == "kernel").height == 40_000
    for cut in (1000, (p.stat().st_size // 2)):
        q = tmp_path / f"cut{cut}.json.gz"
        q.write_bytes(p.read_bytes()[:-cut])
        with pytest.raises(TraceImportError, match="truncated gzip"):
            stallscope.import_kineto(q)
    q = tmp_path / "corrupt.json.gz"
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 3 : len(raw) // 3 + 64] = b"\xff" * 64
    q.write_bytes(bytes(raw))
    with pytest.raises(TraceImportError, match=r"gzip|JSON"):
        stallscope.import_kineto(q)


@pytest.mark.parametrize("doc", [{"foo": 1}, {"traceEvents": 5}, [1, 2], "x", None])
def test_missing_trace_events(tmp_path: Path, doc: Any) -> None:
    p = write(tmp_path / "t.json", doc)
    with pytest.raises(TraceImportError, match=r"traceEvents|not a Kineto trace"):
        stallscope.import_kineto(p)


def test_empty_file_and_missing_path(tmp_path: Path) -> None:
    (tmp_path / "e.json").write_bytes(b"")
    with pytest.raises(TraceImportError, match="empty file"):
        stallscope.import_kineto(tmp_path / "e.json")
    with pytest.raises(TraceImportError, match="no such file"):
        stallscope.import_kineto(tmp_path / "nope.json")
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(TraceImportError, match=r"no \.json"):
        stallscope.import_kineto(empty)
    with pytest.raises(TraceImportError, match="no trace given"):
        stallscope.import_kineto([])


def test_events_without_dur_and_negative_dur_are_counted(tmp_path: Path) -> None:
    events = [kernel(10), kernel(20, dur=None), kernel(30, dur=-4), kernel(40, dur=-1)]
    del events[1]["dur"]
    p = write(tmp_path / "t.json", trace(events))
    with pytest.warns(StallscopeWarning) as rec:
        ev = stallscope.import_kineto(p)
    msg = str(rec[0].message)
    assert "1 complete events" in msg
    assert "without 'dur'" in msg
    assert "2 events with a negative 'dur'" in msg
    assert ev.filter(pl.col("kind") == "kernel").height == 1


def test_unknown_categories_are_kept_and_counted(tmp_path: Path) -> None:
    odd = {"ph": "X", "cat": "my_custom_cat", "name": "x", "pid": 1, "tid": 1, "ts": 5, "dur": 2}
    p = write(tmp_path / "t.json", trace([odd, kernel(10)]))
    with pytest.warns(StallscopeWarning, match=r"1 events of unknown categories .*my_custom_cat"):
        ev = stallscope.import_kineto(p)
    row = ev.filter(pl.col("name") == "x").row(0, named=True)
    assert (row["kind"], row["category"]) == ("region", "host")


def test_mixed_jobs_in_one_folder(tmp_path: Path) -> None:
    write(tmp_path / "a.json", trace([kernel(1)], distributedInfo={"rank": 0, "world_size": 2}))
    write(tmp_path / "b.json", trace([kernel(1)], distributedInfo={"rank": 1, "world_size": 8}))
    with pytest.raises(TraceImportError, match="different jobs"):
        stallscope.import_kineto(tmp_path)


def test_rank_outside_world(tmp_path: Path) -> None:
    write(tmp_path / "a.json", trace([kernel(1)], distributedInfo={"rank": 0, "world_size": 2}))
    write(tmp_path / "b.json", trace([kernel(1)], distributedInfo={"rank": 5, "world_size": 2}))
    with pytest.raises(TraceImportError, match="outside world_size"):
        stallscope.import_kineto(tmp_path)


def test_duplicated_ranks(tmp_path: Path) -> None:
    write(tmp_path / "a.json", trace([kernel(1)], distributedInfo={"rank": 1, "world_size": 2}))
    write(tmp_path / "b.json", trace([kernel(1)], distributedInfo={"rank": 1, "world_size": 2}))
    with pytest.raises(TraceImportError, match="both rank 1"):
        stallscope.import_kineto(tmp_path)


def test_rank_fallback_is_htas_regex(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text('{"traceEvents": [], "meta": {"rank": 3}}')
    assert stallscope.read_kineto(a).ranks.keys() == {3}
    b = tmp_path / "b.json"
    b.write_text('{"traceEvents": [], "meta": {"rank":3}}')  # no whitespace: no match, rank 0
    assert stallscope.read_kineto(b).ranks.keys() == {0}


def test_float_ns_timestamps_and_base_time(tmp_path: Path) -> None:
    doc = trace(
        [launch(1000.125, dur=2.5), kernel(1003.999, dur=0.002)], baseTimeNanoseconds=10**18
    )
    imp = stallscope.read_kineto(write(tmp_path / "t.json", doc))
    assert imp.ranks[0].ts_float
    assert imp.ranks[0].base_ns == 10**18
    k = imp.events.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (k["start_ns"], k["end_ns"]) == (10**18 + 1_003_999, 10**18 + 1_004_001)


def test_legacy_categories_and_flows(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 0, "dur": 50},
        {
            "ph": "X",
            "cat": "Operator",
            "name": "ProfilerStep#7",
            "pid": 1,
            "tid": 2,
            "ts": 0,
            "dur": 100,
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 2,
            "ts": 5,
            "dur": 3,
        },
        {"ph": "s", "cat": "async_cpu_to_gpu", "id": 42, "pid": 1, "tid": 2, "ts": 5},
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "ncclKernel_AllReduce_RING",
            "pid": 0,
            "tid": 7,
            "ts": 9,
            "dur": 4,
        },
        {"ph": "f", "cat": "async_cpu_to_gpu", "id": 42, "pid": 0, "tid": 7, "ts": 9, "bp": "e"},
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": 1,
            "args": {"bytes": 4096},
        },
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "fwd",
            "pid": 0,
            "tid": 7,
            "ts": 1,
            "dur": 30,
        },
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Event Sync",
            "pid": 0,
            "tid": 7,
            "ts": 30,
            "dur": 1,
            "args": {"cuda_sync_kind": "Event Sync", "stream": -1, "correlation": 50},
        },
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 3},
    ]
    ev = stallscope.import_kineto(write(tmp_path / "t.json", trace(events)))
    by = {r["name"]: r for r in ev.iter_rows(named=True)}
    assert by["aten::mm"]["kind"] == "region"
    assert (by["ProfilerStep#7"]["kind"], by["ProfilerStep#7"]["correlation"]) == ("step", 7)
    assert (by["cudaLaunchKernel"]["kind"], by["cudaLaunchKernel"]["correlation"]) == (
        "runtime",
        42,
    )
    k = by["ncclKernel_AllReduce_RING"]
    assert (k["kind"], k["category"], k["correlation"], k["lane"]) == ("kernel", "comm", 42, 7)
    assert (by["Memcpy HtoD"]["kind"], by["Memcpy HtoD"]["bytes"]) == ("memcpy", 4096)
    assert (by["fwd"]["kind"], by["fwd"]["category"]) == ("marker", "other")
    assert (by["Event Sync"]["kind"], by["Event Sync"]["category"], by["Event Sync"]["lane"]) == (
        "gpu_sync",
        "sync",
        -1,
    )
    assert "[memory]" not in by
    assert "thread_name" not in by


def test_odd_values_do_not_crash(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": None,
            "pid": "GPU 0",
            "tid": "stream 7",
            "ts": "12",
            "dur": 3,
            "args": {
                "stream": "seven",
                "correlation": [1],
                "Input Dims": [[1, 2]],
                "bytes": {"a": 1},
            },
        },
        {"ph": "X", "cat": "cpu_op", "name": "x", "pid": 2**40, "tid": -5, "ts": 1e300, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "y", "pid": 1, "tid": 1, "ts": True, "dur": "abc"},
        7,
        None,
        [],
    ]
    with pytest.warns(StallscopeWarning):
        ev = stallscope.import_kineto(write(tmp_path / "t.json", trace(events)))
    assert dict(ev.schema) == SCHEMA


@pytest.mark.parametrize("base", [3.402823669209385e38, 9.223372036854776e18, -5, "x"])
def test_unusable_base_time_is_counted(tmp_path: Path, base: Any) -> None:
    p = write(tmp_path / "t.json", trace([kernel(10)], baseTimeNanoseconds=base))
    if base == "x":
        ev = stallscope.import_kineto(p)  # not a number: no base, nothing to warn about
    else:
        with pytest.warns(StallscopeWarning, match="baseTimeNanoseconds"):
            ev = stallscope.import_kineto(p)
    assert ev.filter(pl.col("kind") == "kernel")["start_ns"].to_list() == [10_000]


def test_huge_timestamps_are_counted_not_wrapped(tmp_path: Path) -> None:
    p = write(tmp_path / "t.json", trace([kernel(10), kernel(8 * 10**15, dur=10**16)]))
    with pytest.warns(StallscopeWarning, match="unparseable 'ts' or 'dur'"):
        ev = stallscope.import_kineto(p)
    assert (ev["end_ns"] >= ev["start_ns"]).all()
