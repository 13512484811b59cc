"""Device (CUPTI) tracing in windows of a continuous trace: one step in `every` at most, within
a budget of the step time, and every step of an on-demand capture.

Why: on launch-bound steps CUPTI's kernel tracing itself costs what torch.profiler costs (on
an H200, +24 % to +51 % per traced step, bench/results/gpu_overhead*.json), so always-on
device tracing cannot stay under 1 %. Host-side events (regions, steps, data waits,
collective calls) are recorded on every step; device events only inside windows.

How: stallscope.step() calls `DeviceDuty.on_step` (through _core.set_step_hook) at the steps
where something may change. A window of step S starts at the marker of step S: the device is
synchronised (nothing of step S - 1 runs into step S unrecorded), then CUPTI starts; it ends
at the marker of step S + 1: synchronised again (every kernel of step S has ended), then CUPTI
stops with cuptiFinalize, the only way its instrumentation leaves the process (without it
training stays 10-20 % slower after tracing, pytorch/pytorch#146604; cuptiActivityDisable
alone leaves it in). So step S's device columns are exact, and steps outside windows have
host columns only (the summary's ``device`` column says which).

The bound: the cost of a window is what the steps it touched (the traced step, and the step
whose start stopped CUPTI) took over the latest untraced steps' mean, the enabling,
synchronising and finalizing included (CUPTI's first enable may stall for seconds while it
generates its instrumentation, pytorch/kineto#542; measured here, not assumed). A duty window
starts only while the cost of all windows so far plus the last window's cost stays within
`budget` x the time traced; else it is postponed to when it would. On-demand captures are
never refused, but their cost counts, so duty windows pause after one until the budget is
back.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

_NEVER = (1 << 63) - 1
_KEEP_WINDOWS = 4096  # closed windows remembered for covered() (the summary lags a few steps)


class DeviceDuty:
    """The windows of one traced process (see the module docstring). `start` / `stop` turn
    device tracing on and off (raising stops the duty cycle for good, reported in stats());
    `sync` waits for the device (None: not possible here, windows are then marked inexact);
    `set_at` tells step() the next step index at which to call `on_step`."""

    def __init__(
        self,
        every: int,
        budget: float,
        start: Callable[[], object],
        stop: Callable[[], object],
        sync: Callable[[], None] | None,
        set_at: Callable[[int], None],
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        if every < 0 or every == 1:
            raise ValueError(f"every={every}: use 0 (captures only) or 2 and more")
        self.every = every
        self.budget = budget
        self._start, self._stop, self._sync = start, stop, sync
        self._set_at = set_at
        self._clock = clock
        self._lock = threading.Lock()
        self.on = False
        self._first = 0  # the open window's first step
        self._closed: deque[tuple[int, int]] = deque(maxlen=_KEEP_WINDOWS)
        self._captures: list[tuple[int, int]] = []  # requested steps [first, end)
        self._next_duty = every if every else _NEVER
        self._next_call = 1
        self._t0: int | None = None
        self._prev: tuple[int, int] | None = None  # (step index, clock) of the last call
        self._touched: set[int] = set()  # steps whose time holds a window's cost
        self._host_mean: float | None = None  # ns per untraced step, latest span
        self._window_cost = 0.0  # ns, the open or last window's
        self.spent_ns = 0.0
        self.toggle_ns = 0
        self.windows = 0
        self.capture_windows = 0
        self.postponed = 0
        self.error: str | None = None
        self._finished = False

    # -- the step hook (training thread) ---------------------------------------------------------
    def on_step(self, idx: int) -> None:
        """At the marker of step `idx`: account for the steps since the last call, turn device
        tracing on or off, and say when to be called next. Never raises."""
        with self._lock:
            if self._finished:  # a step() that raced the trace's stop
                return
            try:
                self._on_step(idx)
            except Exception as e:  # device tracing stops; training goes on
                self._fail(f"{type(e).__name__}: {e}")

    def _on_step(self, idx: int) -> None:
        t = self._clock()
        self._account(idx, t)
        want = self._wanted(idx, t)
        if want and not self.on and self.error is None:
            t1 = self._clock()
            self._wait_device()
            self._start()
            self.toggle_ns += self._clock() - t1
            self.on, self._first, self._window_cost = True, idx, 0.0
            self.windows += 1
            self.capture_windows += self._in_capture(idx)
        elif self.on and not want:
            self._close(idx)
        if self.on:
            self._touched.add(idx)
        self._captures = [c for c in self._captures if c[1] > idx]
        self._schedule(idx)

    def _close(self, idx: int) -> None:
        t1 = self._clock()
        self.on = False
        self._closed.append((self._first, idx - 1))
        self._touched.add(idx)  # its time holds the synchronisation and the finalize
        try:
            self._wait_device()
        finally:
            self._stop()
            self.toggle_ns += self._clock() - t1

    def _wait_device(self) -> None:
        if self._sync is not None:
            self._sync()

    def _account(self, idx: int, t: int) -> None:
        if self._t0 is None:
            self._t0 = t
        if self._prev is not None:
            pidx, pt = self._prev
            dt, n = t - pt, idx - pidx
            if pidx in self._touched:
                self._touched.discard(pidx)
                extra = max(0.0, dt - (self._host_mean if self._host_mean is not None else dt / 2))
                self.spent_ns += extra
                self._window_cost += extra
            elif n > 0:
                self._host_mean = dt / n
        self._prev = (idx, t)

    def _in_capture(self, idx: int) -> bool:
        return any(a <= idx < b for a, b in self._captures)

    def _wanted(self, idx: int, t: int) -> bool:
        if self._in_capture(idx):
            return True
        if self.every == 0 or self.error is not None:
            return False
        if self.on:
            return False  # a duty window is one step
        if idx < self._next_duty:
            return False
        elapsed = t - (self._t0 if self._t0 is not None else t)
        expected = self._window_cost or (self._host_mean or 0.0)  # none yet: a doubled step
        if self.spent_ns + expected > self.budget * elapsed:
            need = (self.spent_ns + expected) / self.budget - elapsed
            mean = self._host_mean or 0.0
            self._next_duty = idx + max(1, math.ceil(need / mean) if mean > 0 else self.every)
            self.postponed += 1
            return False
        self._next_duty = idx + self.every
        return True

    def _schedule(self, idx: int) -> None:
        if self.on or idx in self._touched:
            nxt = idx + 1  # each touched step's time is measured at the next marker
        else:
            nxt = self._next_duty if self.error is None else _NEVER
            for a, _ in self._captures:
                nxt = min(nxt, max(a, idx + 1))
        self._next_call = nxt
        self._set_at(nxt)

    def _fail(self, why: str) -> None:
        self.error = why
        if self.on:
            self.on = False
            self._closed.append((self._first, self._first - 1))  # nothing covered for sure
            try:
                self._stop()
            except Exception as e:  # already failing: keep the first reason, add this one
                self.error += f"; stopping as well: {type(e).__name__}: {e}"
        self._captures.clear()
        self._next_call = _NEVER
        self._set_at(_NEVER)

    # -- the writer thread -----------------------------------------------------------------------
    def request(self, first: int, end: int) -> None:
        """Trace the device for steps first .. end - 1 (an on-demand capture); a step already
        begun is traced from the next one."""
        with self._lock:
            if self.error is not None:
                return
            self._captures.append((first, end))
            if first < self._next_call:
                self._next_call = first
                self._set_at(first)

    def covered(self, step: int) -> bool:
        """Were the device events of `step` (a step that has ended) all recorded."""
        with self._lock:
            if self.on and step >= self._first:
                return True
            return any(a <= step <= b for a, b in reversed(self._closed))

    def finish(self) -> None:
        """At the trace's stop: close an open window (the trace's stop ends the device
        tracing itself)."""
        with self._lock:
            self._finished = True
            if self.on:
                self.on = False
                last = self._prev[0] if self._prev is not None else self._first
                self._closed.append((self._first, last))
            self._set_at(_NEVER)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            elapsed = (self._prev[1] - self._t0) if self._prev and self._t0 is not None else 0
            out: dict[str, Any] = {
                "every": self.every,
                "budget": self.budget,
                "windows": self.windows,
                "capture_windows": self.capture_windows,
                "postponed": self.postponed,
                "cost_s": round(self.spent_ns / 1e9, 6),
                "toggle_s": round(self.toggle_ns / 1e9, 6),
                "elapsed_s": round(elapsed / 1e9, 6),
                "cost_share": round(self.spent_ns / elapsed, 6) if elapsed > 0 else None,
                "synchronised": self._sync is not None,
                "last_windows": [list(w) for w in list(self._closed)[-20:]],
            }
            if self.error:
                out["error"] = self.error
            return out
