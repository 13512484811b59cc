"""The scanner's two-thread read of a chunk (csrc/kineto/segment_worker.h): a second thread reads
the chunk's second half from a guessed event start, and the result must be the one-thread
result, value for value and code for code (dictionaries in the same order), whatever the chunking,
wherever the guess lands (inside a string, after the list's end), for supported and unsupported
documents alike."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_import_fuzz import CATS, NAMES, event_object, scalar  # type: ignore[import-not-found]

from stallscope.io.kineto import _native_read

pytestmark = pytest.mark.skipif(
    not _native_read.available(), reason="_core built without KinetoScanner"
)


def _scan(texts: list[bytes], chunk: int, split_min: int) -> tuple[list[Any], dict[str, Any], Any]:
    """Each text read as one file of a shared scanner, fed in chunks: (results, dictionaries,
    scanner)."""
    from stallscope import _core

    sc = _core.KinetoScanner(split_min, chunk)  # each chunk read as it comes
    out = []
    for raw in texts:
        sc.begin_file(len(raw))
        for i in range(0, len(raw), chunk):
            if not sc.feed(raw[i : i + chunk]):
                break
        out.append(sc.end_file())  # the reason, when the scanner declines the text
    return out, {w: sc.strings(w) for w in ("cat", "name", "args")}, sc


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(type(a) is type(b) and a == b)


def _check(texts: list[bytes], chunk: int, split_min: int) -> Any:
    one, one_dicts, _ = _scan(texts, chunk, 0)
    two, two_dicts, sc = _scan(texts, chunk, split_min)
    assert _same(one, two)
    assert one_dicts == two_dicts
    return sc


def test_real_traces_read_by_two_threads(kineto_data: Path) -> None:
    files = sorted(kineto_data.glob("*/*"))
    texts = [
        gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes() for f in files
    ]
    texts = [t for t in texts if t]
    assert len(texts) >= 5
    for chunk in (1 << 20, 100_003):
        sc = _check(texts, chunk, 4096)
        assert sc.splits_taken > 0 and sc.splits_missed == 0


def _event(i: int, name: str, ts: Any = None) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel" if i % 3 else "cpu_op",
        "name": name,
        "pid": 1,
        "tid": 7,
        "ts": 1000 + i if ts is None else ts,
        "dur": 5,
        "args": {"correlation": i, "External id": i, "stream": 7},
    }


def test_wrong_guesses_are_read_by_one_thread() -> None:
    # Names holding what looks like the next event's start: `}, {` and `},\n  {`.
    trap = '}, {"ph": "X", "cat": "kernel", "name": "fake", "ts": 1, "dur": 1},\n  {'
    events = [_event(i, trap if i % 2 else f"k{i}") for i in range(1000)]
    for e in events:
        e["args"]["note"] = trap
    raw = json.dumps({"traceEvents": events, "after": {"x": [1, 2]}}, indent=2).encode()
    scanners = [_check([raw], chunk, 64) for chunk in (7_000, 10_000, 13_000, 20_000)]
    assert sum(sc.splits_missed for sc in scanners) > 0
    assert sum(sc.splits_taken for sc in scanners) > 0
    # The same with nothing but traps in the second half: every guess there is wrong.
    events = [_event(i, f"k{i}") for i in range(50)] + [_event(i, trap) for i in range(50, 60)]
    raw = json.dumps({"traceEvents": events}).encode()
    _check([raw], len(raw), 64)


def test_float_times_only_in_the_second_half_decide_for_the_file() -> None:
    events = [_event(i, f"k{i % 7}") for i in range(300)]
    events[-1]["ts"] = 1299.0625  # one float: every ts becomes float64 µs
    raw = json.dumps({"traceEvents": events}).encode()
    sc = _check([raw], len(raw), 64)
    assert sc.splits_taken == 1
    res, _, _ = _scan([raw], len(raw), 64)
    assert res[0]["ts_float"] is True


def test_unsupported_event_in_the_second_half_gives_the_same_reason() -> None:
    events: list[Any] = [_event(i, f"k{i}") for i in range(300)]
    events[250]["pid"] = 1.5  # a float pid: the scanner declines the file
    raw = json.dumps({"traceEvents": events}).encode()
    res, _, _ = _scan([raw], len(raw), 64)
    assert res == ["non-integer in an integer field"]
    _check([raw], len(raw), 64)
    raw = raw[: len(raw) - 40]  # truncated inside the last event
    _check([raw], len(raw), 64)


def test_several_files_share_dictionaries_and_indices() -> None:
    texts = [
        json.dumps({"traceEvents": [_event(i, f"n{(i * r) % 37}") for i in range(200)]}).encode()
        for r in (1, 3, 5)
    ]
    sc = _check(texts, 10_000, 256)
    assert sc.splits_taken > 0


class _Pieces:
    """A reader whose readinto writes the text in pieces of the given sizes, in turn (short
    reads, as a gzip reader or a pipe gives them)."""

    def __init__(self, raw: bytes, sizes: list[int]) -> None:
        self.raw, self.sizes, self.pos, self.calls = raw, sizes, 0, 0

    def readinto(self, buf: memoryview) -> int:
        n = min(len(buf), self.sizes[self.calls % len(self.sizes)], len(self.raw) - self.pos)
        buf[:n] = self.raw[self.pos : self.pos + n]
        self.pos += n
        self.calls += 1
        return n


def test_feed_from_reads_in_place_whatever_pieces_the_reader_gives() -> None:
    # The importer reads a file straight into the scanner's buffer (gunzipped there); the
    # pieces and the buffer's size decide where values are cut and where the text is split
    # between the threads, never the result.
    from stallscope import _core

    trap = '}, {"ph": "X", "name": "fake"},\n  {'
    events = [_event(i, trap if i % 5 == 0 else f"k{i % 17}") for i in range(3000)]
    raw = json.dumps({"traceEvents": events, "x": {"rank": 3}}).encode()
    (whole,), dicts, _ = _scan([raw], len(raw), 0)
    assert isinstance(whole, dict) and whole["rank"] == 3
    taken = 0
    for fill, sizes in (
        (1 << 20, [1 << 20]),
        (8192, [1, 7, 5000, 300, 65536]),
        (50_000, [4093, 12_000]),
    ):
        sc = _core.KinetoScanner(4096, fill)
        sc.begin_file(len(raw))
        reader = _Pieces(raw, sizes)
        assert sc.feed_from(reader.readinto)
        assert reader.pos == len(raw)
        assert _same([sc.end_file()], [whole]), (fill, sizes)
        assert {w: sc.strings(w) for w in ("cat", "name", "args")} == dicts
        taken += sc.splits_taken
    assert taken > 0
    # The reader's own error reaches the caller as it is (the importer words gzip errors).
    sc = _core.KinetoScanner()
    sc.begin_file()

    def broken(buf: memoryview) -> int:
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    with pytest.raises(EOFError, match="end-of-stream"):
        sc.feed_from(broken)
    with pytest.raises(ValueError, match="past the buffer"):
        sc.feed_from(lambda buf: len(buf) + 1)


def test_release_buffers_between_files_keeps_dictionaries_and_results() -> None:
    # The importer frees the text buffers and the second thread once it has read the last file;
    # a scanner read again afterwards makes them anew and goes on with the same dictionaries.
    from stallscope import _core

    texts = [
        json.dumps({"traceEvents": [_event(i, f"n{(i * r) % 37}") for i in range(2000)]}).encode()
        for r in (1, 3)
    ]
    expected, dicts, _ = _scan(texts, 20_000, 4096)
    sc = _core.KinetoScanner(4096, 20_000)
    got = []
    for raw in texts:
        sc.begin_file(len(raw))
        reader = _Pieces(raw, [7_000])
        assert sc.feed_from(reader.readinto)
        got.append(sc.end_file())
        sc.release_buffers()
    assert _same(got, expected)
    assert {w: sc.strings(w) for w in ("cat", "name", "args")} == dicts
    assert sc.splits_taken > 0


_fast = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
_slow = settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))

# Events as Kineto writes them, with integer or float times, flows, NCCL metadata and names that
# hold separators and escapes: most documents are read whole, so the worker's events are taken.
_int = st.integers(0, 10**12)
clean_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "X", "X", "s", "f", "i"]),
        "cat": st.sampled_from(CATS),
        "name": st.one_of(st.sampled_from(NAMES), st.text(max_size=12)),
        "pid": _int,
        "tid": _int,
        "ts": st.one_of(_int, st.floats(0, 1e12, allow_nan=False)),
        "dur": st.one_of(st.integers(-5, 10**6), st.floats(0, 1e6, allow_nan=False)),
    },
    optional={
        "id": _int,
        "args": st.fixed_dictionaries(
            {},
            optional={
                "correlation": _int,
                "External id": _int,
                "stream": _int,
                "Collective name": st.sampled_from(["allreduce", "send"]),
                "dtype": st.sampled_from(["Float", "x"]),
                "note": st.sampled_from(["}, {", '}, {"ph": "X"}, {', "a,b"]),
            },
        ),
    },
)


@st.composite
def split_document(draw: st.DrawFn) -> bytes:
    """A document of many events (a few fuzzed, maybe one scalar element), its metadata before
    or after traceEvents, compact or indented, perhaps truncated."""
    kinds = st.sampled_from([clean_event] * 15 + [event_object])
    events = draw(st.lists(kinds.flatmap(lambda k: k), max_size=60))
    if events and draw(st.integers(0, 7)) == 7:
        events[draw(st.integers(0, len(events) - 1))] = draw(scalar)
    meta = {"schemaVersion": 1, "distributedInfo": {"rank": draw(st.integers(0, 3))}}
    doc = (
        {"traceEvents": events, **meta} if draw(st.booleans()) else {**meta, "traceEvents": events}
    )
    raw = json.dumps(doc, indent=draw(st.sampled_from([None, 2]))).encode()
    cut = draw(st.sampled_from([0] * 6 + [1, 9, 200]))
    return raw[: max(len(raw) - cut, 0)]


def _fuzz(raw: bytes, chunk: int) -> None:
    _check([raw], chunk, 16)


@_fast
@given(raw=split_document(), chunk=st.sampled_from([37, 700, 1 << 20, 1 << 20]))
def test_fuzz_two_threads_equal_one(raw: bytes, chunk: int) -> None:
    _fuzz(raw, chunk)


@pytest.mark.slow
@_slow
@given(raw=split_document(), chunk=st.sampled_from([37, 700, 1 << 20, 1 << 20]))
def test_fuzz_two_threads_equal_one_3k(raw: bytes, chunk: int) -> None:
    _fuzz(raw, chunk)
