"""Rings: order, wrap-around, overflow accounting, draining while threads record."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from stallscope import _core


def _stats_for(tid: int) -> dict[str, int]:
    (s,) = [t for t in _core.thread_stats() if t["tid"] == tid]
    return s


def _record_seq(first: int, n: int, name_id: int = 0) -> int:
    return sum(
        _core.record(0, 0, name_id, i, i + 1, correlation=i) for i in range(first, first + n)
    )


@pytest.mark.usefixtures("small_pool")
def test_full_ring_drops_and_counts_never_blocks() -> None:
    assert _core.ring_capacity() == 16
    accepted = _record_seq(0, 40)
    assert accepted == 16
    s = _stats_for(_core.current_lane())
    assert (s["recorded"], s["dropped"], s["buffered"]) == (16, 24, 16)
    cols = _core.drain()
    # The oldest 16 are kept, in order; the 24 that found the ring full are the ones lost.
    assert cols["correlation"].tolist() == list(range(16))


@pytest.mark.usefixtures("small_pool")
def test_wrap_around_keeps_order() -> None:
    got: list[int] = []
    nxt = 0
    for batch in (10, 12, 16, 5, 16, 9):  # crosses the end of the 16-slot ring repeatedly
        assert _record_seq(nxt, batch) == batch
        nxt += batch
        got += _core.drain()["correlation"].tolist()
    assert got == list(range(nxt))
    assert _stats_for(_core.current_lane())["dropped"] == 0


@pytest.mark.usefixtures("small_pool")
def test_partial_drain_leaves_the_rest_in_order() -> None:
    _record_seq(0, 12)
    first = _core.drain(5)["correlation"].tolist()
    rest = _core.drain()["correlation"].tolist()
    assert first + rest == list(range(12))


@pytest.mark.usefixtures("small_pool")
def test_drained_columns_carry_every_field() -> None:
    nid, did = _core.intern("kern"), _core.intern("k=v")
    _core.record(5, 1, nid, 100, 250, correlation=7, bytes=4096, lane=13, device=2, detail_id=did)
    c = _core.drain()
    assert {k: v.tolist() for k, v in c.items()} == {
        "start_ns": [100],
        "end_ns": [250],
        "correlation": [7],
        "bytes": [4096],
        "name_id": [nid],
        "detail_id": [did],
        "lane": [13],
        "device": [2],
        "kind": [5],
        "category": [1],
    }


def test_recording_off_records_nothing() -> None:
    assert not _core.recording()
    assert _core.record(0, 0, 0, 1, 2) is False
    assert _core.buffered() == 0


def test_interning_is_stable_and_dense() -> None:
    a = _core.intern("alpha-unique-name")
    assert _core.intern("alpha-unique-name") == a
    b = _core.intern("beta-unique-name")
    assert b == a + 1 or b > a
    assert _core.intern("") == 0
    table = _core.strings_from(0)
    assert table[a] == "alpha-unique-name" and table[b] == "beta-unique-name" and table[0] == ""
    assert _core.strings_from(a)[0] == "alpha-unique-name"
    assert _core.intern("ünïcode ✓") == _core.intern("ünïcode ✓")


def test_concurrent_drain_accounts_for_every_event() -> None:
    """Producers faster than the collector on tiny rings: recorded + dropped == produced, and
    what was recorded arrives complete and in order per thread."""
    _core.configure(8, 64)
    _core.discard()
    _core.reset_stats()
    _core.set_recording(True)
    drained: list[dict[str, np.ndarray]] = []
    done = threading.Event()

    def collector() -> None:
        while not done.is_set():
            drained.append(_core.drain())
        drained.append(_core.drain())

    t = threading.Thread(target=collector)
    t.start()
    try:
        _elapsed, accepted = _core.stress_record(4, 200_000)
    finally:
        done.set()
        t.join()
        _core.set_recording(False)
    lanes = np.concatenate([d["lane"] for d in drained])
    corr = np.concatenate([d["correlation"] for d in drained])
    stats = [s for s in _core.thread_stats() if s["recorded"] or s["dropped"]]
    assert sum(s["recorded"] for s in stats) == sum(accepted) == len(corr)
    assert sum(s["recorded"] + s["dropped"] for s in stats) == 4 * 200_000
    for lane in range(4):
        seq = corr[lanes == lane]
        assert len(seq) == accepted[lane]
        assert np.all(np.diff(seq) > 0), "events of one thread must stay in order"


def test_eight_threads_million_events_each_zero_loss() -> None:
    """8 threads x 1 M events into rings large enough: nothing dropped, nothing duplicated."""
    n = 1_000_000
    _core.configure(16, 1 << 20)
    _core.discard()
    _core.reset_stats()
    _core.set_recording(True)
    try:
        _elapsed, accepted = _core.stress_record(8, n)
    finally:
        _core.set_recording(False)
    assert accepted == [n] * 8
    cols = _core.drain()
    assert len(cols["lane"]) == 8 * n
    for lane in range(8):
        seq = cols["correlation"][cols["lane"] == lane]
        assert np.array_equal(seq, np.arange(n))
    assert sum(s["dropped"] for s in _core.thread_stats()) == 0
    _core.configure(64, 1 << 16)  # give the memory back to later tests' default size
