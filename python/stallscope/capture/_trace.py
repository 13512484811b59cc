"""Starting and stopping a trace: the ring pool, the writer thread, run.json, and what happens on
stop(), normal exit, SIGTERM and fork()."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import types
import warnings
from pathlib import Path
from typing import Any

from stallscope import _core
from stallscope.capture import _hooks
from stallscope.capture._continuous import Continuous, ContinuousOptions, continuous_options
from stallscope.capture._env import Placement, placement
from stallscope.exceptions import StallscopeWarning, TraceError
from stallscope.io import _run_json as run_json
from stallscope.io._run_dir import final_path, stem_for

_active: Trace | None = None
_active_lock = threading.Lock()
_forked_from_traced = False  # this process is a fork() child of a process that was tracing
_step_name_id = _core.intern("step")


def _versions() -> dict[str, str]:
    import numpy
    import polars

    from stallscope import __version__

    v = {
        "stallscope": __version__,
        "python": sys.version.split()[0],
        "polars": polars.__version__,
        "numpy": numpy.__version__,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        v["torch"] = str(getattr(torch, "__version__", "?"))
    return v


class Trace:
    """A trace of this process into `out_dir`. Use as a context manager, or call start() / stop().

    Only one trace records per process at a time. Rank, world size and local rank come from the
    launcher's environment (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK) unless given.

    Options: `flush_interval` (s, at most this much is lost if the process is killed),
    `ring_capacity` (events buffered per thread between drains), `max_threads` (recording threads
    with a ring of their own; events of further threads are dropped and counted),
    `handle_sigterm` (flush on SIGTERM, then let it terminate the process), `overwrite`
    (replace this rank's data from an earlier run in the same directory), `backends` (capture
    backends to run, see _hooks.py; None = those on by default here, () = none).

    `mode`: "full" (every event is kept) or "continuous" (always-on: full events only for a
    rolling window of the last `window_steps` steps, never more than `window_s` seconds
    (default 60 s); a per-step stall summary written as the job runs, `stallscope.load_summary`;
    the full events of the next K steps on request: the trigger file RUN/capture.trigger or
    the `capture_signal`, default SIGUSR2, for `capture_steps` steps; see docs/production.md).
    None: the environment's STALLSCOPE_MODE, else "full"; the other continuous options not
    given come from STALLSCOPE_WINDOW_STEPS, STALLSCOPE_WINDOW_S, STALLSCOPE_SUMMARY_LAG_S,
    STALLSCOPE_CAPTURE_SIGNAL, STALLSCOPE_CAPTURE_STEPS. `summary_lag_s`: how long after a step
    ends its summary row is written (default twice the flush interval). In continuous mode,
    device (CUPTI) events are recorded for one step in `device_every` at most (default 100; 0:
    only in captures; 1: every step) while their measured cost stays within `device_budget`
    (default 0.01) of the time traced, and for every captured step (STALLSCOPE_DEVICE_EVERY,
    STALLSCOPE_DEVICE_BUDGET).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        *,
        rank: int | None = None,
        world_size: int | None = None,
        local_rank: int | None = None,
        flush_interval: float = 1.0,
        ring_capacity: int = 1 << 16,
        max_threads: int = 64,
        handle_sigterm: bool = True,
        overwrite: bool = False,
        backends: list[str] | tuple[str, ...] | None = None,
        mode: str | None = None,
        window_steps: int | None = None,
        window_s: float | None = None,
        summary_lag_s: float | None = None,
        capture_signal: int | str | None = "SIGUSR2",
        capture_steps: int | None = None,
        device_every: int | None = None,
        device_budget: float | None = None,
    ) -> None:
        if not 0.01 <= flush_interval <= 3600:
            raise TraceError(f"flush_interval={flush_interval!r} s: use a value from 0.01 to 3600")
        if not 16 <= ring_capacity <= 1 << 26:
            raise TraceError(
                f"ring_capacity={ring_capacity!r}: use 16 to 67108864 events per thread"
            )
        if not 1 <= max_threads <= 4096:
            raise TraceError(f"max_threads={max_threads!r}: use 1 to 4096")
        self.out_dir = Path(out_dir)
        try:
            self.placement: Placement = placement(rank, world_size, local_rank)
            self.continuous: ContinuousOptions | None = continuous_options(
                mode,
                window_steps=window_steps,
                window_s=window_s,
                summary_lag_s=summary_lag_s,
                capture_signal=capture_signal,
                capture_steps=capture_steps,
                device_every=device_every,
                device_budget=device_budget,
                flush_interval=flush_interval,
            )
        except ValueError as e:
            raise TraceError(str(e)) from None
        self.mode = "full" if self.continuous is None else "continuous"
        self.flush_interval = float(flush_interval)
        self.ring_capacity = int(ring_capacity)
        self.max_threads = int(max_threads)
        self.handle_sigterm = handle_sigterm
        self.overwrite = overwrite
        try:
            self._backends = _hooks.select(backends)
        except ValueError as e:
            raise TraceError(str(e)) from None
        self.backend_info: dict[str, Any] = {}
        self.pid = os.getpid()
        self.stem = stem_for(self.placement.rank, self.pid if _forked_from_traced else None)
        self.path: Path | None = None  # the events file, once stopped
        self._writer: Any = None  # _writer.RankWriter once started
        self.continuous_state: Continuous | None = None  # continuous mode's, once started
        self._prev_sigterm: Any = None
        self._prev_capture: Any = None  # the capture signal's handler before ours
        self._started = False
        self._stopped = False
        self._steps_ended_at = 0  # the step index whose end is marked (0: none)
        # How the steps were found (run.json ``step_source``): set by a step-finding backend
        # (stallscope profile), else explicit markers or none, decided at stop.
        self.step_source: dict[str, Any] | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> Trace:
        global _active
        with _active_lock:
            if self._started:
                raise TraceError("this trace was already started; create a new stallscope.trace()")
            if _active is not None:
                raise TraceError(
                    f"a trace into {_active.out_dir} is already recording in this process: stop it first"
                )
            try:
                self.out_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise TraceError(f"cannot create the run directory {self.out_dir}: {e}") from None
            final = final_path(self.out_dir, self.stem)
            if final.exists() and not self.overwrite:
                raise TraceError(
                    f"{final} already exists (an earlier run with rank {self.placement.rank}): "
                    "trace into a new directory, or pass overwrite=True"
                )
            if (
                not _core.configured()
                or _core.ring_capacity() < self.ring_capacity
                or _core.max_threads() < self.max_threads
            ):
                _core.configure(self.max_threads, self.ring_capacity)
            _core.discard()  # leftovers from a thread that raced an earlier stop
            _core.reset_stats()
            _core.reset_step_index(0)
            self._write_metadata(status="running")
            from stallscope.capture._writer import RankWriter  # pyarrow: loaded when a trace starts

            cont = None
            if self.continuous is not None:
                cont = Continuous(
                    self.continuous,
                    self.out_dir,
                    self.stem,
                    summary=not _forked_from_traced,  # Polars' pools do not survive fork()
                    step_index=_core.step_index,
                )
            self.continuous_state = cont
            self._writer = RankWriter(
                self.out_dir, self.stem, self.placement.rank, self.pid, self.flush_interval, cont
            )
            self._writer.start()
            self._install_sigterm()
            self._install_capture_signal()
            _core.set_recording(True)
            self._started = True
            _active = self
        self._run_backends("on_start")
        return self

    def _run_backends(self, method: str, device: bool | None = None) -> None:
        """Call `method` of each backend (`device`: only those that do / do not record device
        activity, their ``device`` attribute; None: all)."""
        for b in self._backends:
            if device is not None and bool(getattr(b, "device", False)) != device:
                continue
            if self.backend_info.get(b.name, {}).get("error"):
                continue  # failed at start: stays off
            try:
                meta = getattr(b, method)(self) or {}
                self.backend_info.setdefault(b.name, {}).update(meta)
            except Exception as e:  # a backend problem never breaks training
                self.backend_info.setdefault(b.name, {})["error"] = (
                    f"{method}: {type(e).__name__}: {e}"
                )
                warnings.warn(
                    f"stallscope backend {b.name} disabled: {e}", StallscopeWarning, stacklevel=3
                )

    def attach_backend(self, name: str) -> None:
        """Start capture backend `name` on this running trace (e.g. torch_dist once
        torch.distributed is initialised); no-op when it already runs or the trace stopped."""
        b = _hooks.get(name)
        if not self.recording or any(x.name == b.name for x in self._backends):
            return
        self._backends.append(b)
        try:
            self.backend_info.setdefault(b.name, {}).update(b.on_start(self) or {})
        except Exception as e:  # a backend problem never breaks training
            self.backend_info.setdefault(b.name, {})["error"] = f"on_start: {type(e).__name__}: {e}"
            warnings.warn(
                f"stallscope backend {b.name} disabled: {e}", StallscopeWarning, stacklevel=2
            )

    def stop(self) -> Path | None:
        """Stop recording, write every buffered event, merge the part files. Returns the events
        file (None if nothing was recorded). Idempotent."""
        global _active
        if not self._started or self._stopped:
            return self.path
        # Device backends first (CUPTI flushes the GPU's completed activity): the last step holds
        # the GPU work it launched. It ends here, not after the other backends' stop work (the
        # clock sample at stop is a collective: it waits for every rank, tens of ms) nor after
        # the file writes.
        self._run_backends("on_stop", device=True)
        last_step_end = _core.now_ns()
        self._run_backends("on_stop", device=False)
        with _active_lock:
            if self._stopped:
                return self.path
            self.end_steps(last_step_end)  # every step marked before stop() gets an end
            if self.step_source is None:
                marked = _core.step_index() > 0
                self.step_source = {"source": "stallscope.step" if marked else "none"}
            _core.set_recording(False)
            self._stopped = True
            _active = None
            self._restore_sigterm()
            self._restore_capture_signal()
            assert self._writer is not None
            try:
                self.path = self._writer.close()
            finally:
                self._write_metadata(status="stopped")
        return self.path

    def end_steps(self, at_ns: int) -> None:
        """End the last step marked so far at `at_ns` (process clock, ns): what runs after it,
        until the next step(), belongs to no step (teardown after the last step, say). A no-op
        when no step was marked or the last one already has its end."""
        index = _core.step_index()
        if index == 0 or self._steps_ended_at == index or not self.recording:
            return
        # An instant marker after the last one closes its window and opens none.
        _core.record(
            2, 0, _step_name_id, at_ns, at_ns, correlation=index + 1, lane=_core.current_lane()
        )
        self._steps_ended_at = index

    def steps_ended(self) -> None:
        """Say that the last step marker recorded ends the last step (markers placed at the ends
        of steps): stop() adds no end after it."""
        self._steps_ended_at = _core.step_index()

    def __enter__(self) -> Trace:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def recording(self) -> bool:
        return self._started and not self._stopped

    @property
    def events_written(self) -> int:
        return self._writer.events_written if self._writer is not None else 0

    # -- run.json ------------------------------------------------------------------------------
    def _write_metadata(self, status: str) -> None:
        mono, real = _core.now_ns(), _core.realtime_ns()
        if status == "running":
            entry = run_json.started(
                placement=self.placement,
                pid=self.pid,
                ppid=os.getppid(),
                forked_child=_forked_from_traced,
                flush_interval_s=self.flush_interval,
                ring_capacity=_core.ring_capacity(),
                max_threads=_core.max_threads(),
                versions=_versions(),
                argv=sys.argv,
                monotonic_ns=mono,
                realtime_ns=real,
                mode=self.mode,
                continuous=None if self.continuous is None else self.continuous.as_json(),
            )
        else:
            cont = self._writer.continuous if self._writer is not None else None
            entry = run_json.stopped(
                threads=_core.thread_stats(),
                no_thread_slot=_core.no_slot_drops(),
                nesting_too_deep=_core.too_deep_drops(),
                events_written=self.events_written,
                backends=self.backend_info,
                file=self.path.name if self.path else None,
                steps=_core.step_index(),
                step_source=self.step_source or {},
                monotonic_ns=mono,
                realtime_ns=real,
                continuous=None if cont is None else cont.stats(),
            )
        run_json.update_process(self.out_dir, self.stem, entry)

    # -- signals -------------------------------------------------------------------------------
    def _install_sigterm(self) -> None:
        if not self.handle_sigterm or threading.current_thread() is not threading.main_thread():
            return
        self._prev_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, self._on_sigterm)

    def _restore_sigterm(self) -> None:
        # From another thread the handler stays; once stopped it only passes the signal on.
        if self._prev_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._prev_sigterm)

    def _install_capture_signal(self) -> None:
        """Continuous mode: the capture signal asks the writer thread for an on-demand capture
        (capture/_on_demand.py). Only the main thread can install a handler."""
        cont = self._writer.continuous if self._writer is not None else None
        sig = self.continuous.capture_signal if self.continuous is not None else None
        if cont is None or sig is None or threading.current_thread() is not threading.main_thread():
            return
        prev = signal.getsignal(sig)
        on_demand = cont.on_demand

        def on_capture_signal(signum: int, frame: types.FrameType | None) -> None:
            on_demand.signalled = True
            if callable(prev):
                prev(signum, frame)

        self._prev_capture = (sig, prev)
        signal.signal(sig, on_capture_signal)

    def _restore_capture_signal(self) -> None:
        if self._prev_capture is not None and threading.current_thread() is threading.main_thread():
            sig, prev = self._prev_capture
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
            self._prev_capture = None

    def _on_sigterm(self, signum: int, frame: types.FrameType | None) -> None:
        prev = self._prev_sigterm
        self.stop()
        self._prev_sigterm = None
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_IGN:
            return
        else:  # default action: terminate, as if we had not been here
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)


def trace(out_dir: str | os.PathLike[str], **options: Any) -> Trace:
    """A trace of this process into `out_dir` (see `Trace` for the options). Use it as a context
    manager (``with stallscope.trace("run"):``) or call ``.start()`` and ``.stop()``."""
    return Trace(out_dir, **options)


def start(out_dir: str | os.PathLike[str], **options: Any) -> Trace:
    """Start tracing this process into `out_dir`; returns the running `Trace`."""
    return Trace(out_dir, **options).start()


def stop() -> Path | None:
    """Stop the trace that is recording in this process (no-op when none is)."""
    t = _active
    return t.stop() if t is not None else None


def active() -> Trace | None:
    """The trace recording in this process, if any."""
    return _active


def end_steps(at_ns: int | None = None) -> None:
    """End the last step of the recording trace at `at_ns` (now when None); see Trace.end_steps."""
    t = _active
    if t is not None:
        t.end_steps(_core.now_ns() if at_ns is None else at_ns)


def _after_fork_in_child() -> None:
    # The native core already emptied the rings and switched recording off (pthread_atfork).
    global _active, _active_lock, _forked_from_traced
    _active_lock = threading.Lock()  # a parent thread may have held it at fork()
    if _active is not None:
        _forked_from_traced = True
        _active._stopped = True  # never flush the parent's trace from here
    _active = None
    _core.set_step_hook(None)  # the parent's device windows: CUPTI stays off in a child


def _at_exit() -> None:
    t = _active
    if t is not None and t.pid == os.getpid():
        t.stop()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
