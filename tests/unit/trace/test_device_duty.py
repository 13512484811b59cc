"""Device windows of a continuous trace (capture/_device_duty.py): which steps are traced, the
order of synchronising and starting / stopping, the budget, captures, failures; and the step
hook of stallscope.step() that drives them."""

from __future__ import annotations

from typing import Any

import pytest

from stallscope import _core
from stallscope.capture._device_duty import DeviceDuty

MS = 1_000_000


class Rig:
    """A DeviceDuty on a fake clock, driven like step() drives it: on_step(idx) once idx
    reaches the index it asked for."""

    def __init__(
        self, every: int, budget: float = 1.0, *, start_ms: float = 0.0, step_ms: float = 10.0
    ) -> None:
        self.t = 0
        self.at = 1
        self.log: list[tuple[str, int]] = []
        self.idx = 0
        self.start_ms, self.step_ms = start_ms, step_ms
        self.fail_start = False
        self.duty = DeviceDuty(
            every, budget, self._start, self._stop, self._sync, self._set_at, lambda: self.t
        )

    def _start(self) -> None:
        if self.fail_start:
            raise RuntimeError("no CUPTI")
        self.t += int(self.start_ms * MS)
        self.log.append(("start", self.idx))

    def _stop(self) -> None:
        self.log.append(("stop", self.idx))

    def _sync(self) -> None:
        self.log.append(("sync", self.idx))

    def _set_at(self, at: int) -> None:
        self.at = at

    def run(self, steps: int, traced_extra_ms: float = 0.0) -> None:
        for _ in range(steps):
            self.idx += 1
            if self.idx >= self.at:
                self.duty.on_step(self.idx)
            self.t += int((self.step_ms + (traced_extra_ms if self.duty.on else 0)) * MS)

    def started(self) -> list[int]:
        return [i for what, i in self.log if what == "start"]

    def stopped(self) -> list[int]:
        return [i for what, i in self.log if what == "stop"]


def test_one_step_in_every_synchronised_at_both_edges() -> None:
    r = Rig(every=5)
    r.run(23)
    assert r.started() == [5, 10, 15, 20]
    assert r.stopped() == [6, 11, 16, 21]
    # the device is waited for before CUPTI starts and before it stops
    assert r.log[:4] == [("sync", 5), ("start", 5), ("sync", 6), ("stop", 6)]
    covered = [s for s in range(1, 23) if r.duty.covered(s)]
    assert covered == [5, 10, 15, 20]
    st = r.duty.stats()
    assert (st["windows"], st["postponed"], st["synchronised"]) == (4, 0, True)
    assert st["last_windows"] == [[5, 5], [10, 10], [15, 15], [20, 20]]


def test_hook_called_only_where_something_may_change() -> None:
    r = Rig(every=50)
    calls: list[int] = []
    real = r.duty.on_step

    def spy(idx: int) -> None:
        calls.append(idx)
        real(idx)

    r.duty.on_step = spy  # type: ignore[method-assign]
    r.run(120)
    # the first step (the clock's origin), each window's start, its stop, and the step after
    # the stop (whose time holds the stop's cost)
    assert calls == [1, 50, 51, 52, 100, 101, 102]


def test_budget_postpones_windows_whatever_they_cost() -> None:
    # every traced step costs 100 ms over a 10 ms step, and starting CUPTI 500 ms: a window
    # costs ~0.6 s, so 1 % allows one per ~60 s of 10 ms steps, not one in 10 steps
    r = Rig(every=10, budget=0.01, start_ms=500)
    r.run(20_000, traced_extra_ms=100)
    st = r.duty.stats()
    assert st["postponed"] > 0
    assert 2 <= st["windows"] <= 5  # 200 s of steps / ~60 s per window
    # the measured cost stays within the budget (plus at most one window's cost)
    assert st["cost_s"] <= 0.01 * st["elapsed_s"] + 0.7
    assert st["cost_share"] == pytest.approx(st["cost_s"] / st["elapsed_s"], rel=1e-3)


def test_first_window_waits_for_the_budget() -> None:
    # a prior of one doubled step: at 1 % the first window comes after ~100 steps
    r = Rig(every=2, budget=0.01)
    r.run(150)
    assert r.started()[0] >= 100


def test_capture_traces_its_steps_and_counts_against_the_budget() -> None:
    r = Rig(every=0)
    r.run(9)
    r.duty.request(10, 13)
    r.run(10)
    assert r.started() == [10] and r.stopped() == [13]
    assert [s for s in range(1, 19) if r.duty.covered(s)] == [10, 11, 12]
    assert r.duty.stats()["capture_windows"] == 1


def test_capture_asked_late_starts_at_the_next_step() -> None:
    r = Rig(every=0)
    r.run(12)
    r.duty.request(10, 15)  # steps 10..12 had begun: traced from 13
    r.run(5)
    assert r.started() == [13] and r.stopped() == [15]
    assert [s for s in range(1, 18) if r.duty.covered(s)] == [13, 14]


def test_start_failure_stops_device_tracing_for_good() -> None:
    r = Rig(every=3)
    r.fail_start = True
    r.run(20)
    st = r.duty.stats()
    assert "no CUPTI" in st["error"]
    assert r.at == (1 << 63) - 1  # step() never calls it again
    assert not any(r.duty.covered(s) for s in range(1, 20))
    r.duty.request(25, 30)  # refused quietly: the error says why
    assert r.at == (1 << 63) - 1


def test_finish_closes_an_open_window() -> None:
    r = Rig(every=0)
    r.duty.request(3, 100)
    r.run(6)
    r.duty.finish()
    assert r.duty.covered(3) and r.duty.covered(6) and not r.duty.covered(7)


def test_every_one_is_not_a_duty_cycle() -> None:
    with pytest.raises(ValueError, match="every=1"):
        Rig(every=1)


def test_step_hook_of_step() -> None:
    seen: list[int] = []

    def hook(i: int) -> None:
        seen.append(i)
        _core.set_step_hook_at(i + 3)

    before = _core.step_index()
    try:
        _core.reset_step_index(0)
        _core.set_step_hook(hook, 2)
        for _ in range(10):
            _core.step()
        assert seen == [2, 5, 8] and _core.step_hook_at() == 11
        _core.set_step_hook(None)
        _core.step()
        assert seen == [2, 5, 8]
    finally:
        _core.set_step_hook(None)
        _core.reset_step_index(before)


def test_step_hook_that_raises_is_reported_and_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    reported: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    calls: list[int] = []

    def bad(i: int) -> None:
        calls.append(i)
        raise RuntimeError("broken hook")

    before = _core.step_index()
    try:
        _core.set_step_hook(bad, 1)
        _core.step()
        _core.step()
        assert len(calls) == 1 and len(reported) == 1
        assert isinstance(reported[0].exc_value, RuntimeError)
        assert _core.step_hook_at() == (1 << 63) - 1
    finally:
        _core.set_step_hook(None)
        _core.reset_step_index(before)


def test_forked_child_has_no_step_hook() -> None:
    import os

    _core.set_step_hook(lambda i: None, 5)
    try:
        pid = os.fork()
        if pid == 0:  # the parent's windows would start CUPTI in the child
            os._exit(0 if _core.step_hook_at() == (1 << 63) - 1 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert _core.step_hook_at() == 5
    finally:
        _core.set_step_hook(None)
