"""The native Kineto scanner (_core.kineto_scan) against the general reader: identical frames and
metadata on every real trace and on fuzzed documents; arbitrary bytes never crash it."""

from __future__ import annotations

import gzip
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from test_import_fuzz import document  # type: ignore[import-not-found]

import stallscope
from stallscope import StallscopeWarning, TraceImportError
from stallscope._kineto import _native, read_kineto
from stallscope._kineto._parse import read_bytes

pytestmark = pytest.mark.skipif(not _native.available(), reason="_core built without kineto_scan")


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    out = []
    for reader in ("general", "auto"):
        monkeypatch.setenv("STALLSCOPE_KINETO_READER", reader)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StallscopeWarning)
            try:
                out.append(read_kineto(path))
            except TraceImportError as e:
                out.append(str(e))
    return out[0], out[1]


def _same(a: Any, b: Any) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    assert_frame_equal(a.events, b.events)
    assert a.ranks == b.ranks


def test_real_traces_identical(kineto_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folders = sorted(p for p in kineto_data.iterdir() if p.is_dir())
    assert folders
    for folder in folders:
        for f in sorted(folder.iterdir()):
            # The scanner takes every real trace itself (no silent fallback).
            assert _native.scan(read_bytes(f), f) is not None, f
        general, native = _both(folder, monkeypatch)
        assert not isinstance(general, str), general
        _same(general, native)
        assert native.events.height > 1000


def _write(d: str, raw: bytes) -> Path:
    p = Path(d) / "trace.json"
    p.write_bytes(raw)
    return p


def _check(doc: Any, truncate: int, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = json.dumps(doc).encode()
    if truncate:
        raw = raw[: max(0, len(raw) - truncate)]
    with tempfile.TemporaryDirectory() as d:
        _same(*_both(_write(d, raw), monkeypatch))


_fast = settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
_slow = settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))


@_fast
@given(doc=document, truncate=st.sampled_from([0, 0, 0, 1, 7]))
def test_fuzz_native_equals_general(
    doc: Any, truncate: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(doc, truncate, monkeypatch)


@pytest.mark.slow
@_slow
@given(doc=document, truncate=st.sampled_from([0, 0, 0, 1, 7]))
def test_fuzz_native_equals_general_10k(
    doc: Any, truncate: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(doc, truncate, monkeypatch)


_SEED = (
    b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\\u00e9", '
    b'"pid": 0, "tid": 7, "ts": 1234.5678, "dur": 1.5e0, "args": {"stream": 7, '
    b'"correlation": 3, "External id": 2, "Collective name": "allreduce"}}, '
    b'{"ph": "s", "id": 3, "pid": "Spans", "tid": 1, "ts": 5, "cat": "ac2g"}], '
    b'"distributedInfo": {"rank": 0}}'
)


@_fast
@given(
    cuts=st.lists(st.tuples(st.integers(0, len(_SEED)), st.binary(max_size=3)), max_size=4),
    end=st.integers(0, len(_SEED)),
)
def test_scanner_survives_mutations(cuts: list[tuple[int, bytes]], end: int) -> None:
    from stallscope import _core

    raw = bytearray(_SEED)
    for at, b in cuts:
        raw[at : at + len(b)] = b
    for data in (bytes(raw), bytes(raw[:end])):
        res = _core.kineto_scan(data)
        assert isinstance(res, (str, dict))
        with tempfile.TemporaryDirectory() as d:
            p = _write(d, data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StallscopeWarning)
                try:
                    ev = stallscope.import_kineto(p)
                except TraceImportError:
                    continue
            assert (ev["end_ns"] >= ev["start_ns"]).all()


def test_scanner_values() -> None:
    res = _native.scan(_SEED, Path("x.json"))
    assert res is not None
    frame, meta = res
    assert frame["name"].to_list() == ["k\u00e9", None]
    assert frame["dur_ns"].to_list() == [1500, None]
    if _native.typed():  # msgspec: a float ts column, rounded to ns; every row counts as float
        assert frame["ts_ns"].to_list() == [1234568, 5000]
        assert frame["ts_is_float"].to_list() == [True, True]
        assert meta["schemaVersion"] == 1
    else:  # Polars' string reader: the decimal digits, truncated to ns
        assert frame["ts_ns"].to_list() == [1234567, 5000]
        assert frame["ts_is_float"].to_list() == [True, False]
        assert meta["schemaVersion"] == "1"
    assert frame["pid"].to_list() == [0, None]
    assert frame["a:Collective name"].to_list() == ["allreduce", None]


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b'{"traceEvents": [', b'{"traceEvents": [{"ph": "X"', b"[1]", b'"x"',
     b'{"traceEvents": null}', b'{"traceEvents": [{"ts": [1]}]}', b"\x1f\x8b"],
)  # fmt: skip
def test_scanner_declines_what_it_does_not_take(raw: bytes) -> None:
    from stallscope import _core

    assert isinstance(_core.kineto_scan(raw), str)


def test_gzip_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(_SEED))
    general, native = _both(p, monkeypatch)
    _same(general, native)
    assert isinstance(native.events, pl.DataFrame)
