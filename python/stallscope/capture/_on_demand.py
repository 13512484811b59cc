"""On-demand capture of a running continuous trace: every rank keeps the full events of the next
K steps in a run directory of their own, with no restart.

A request comes from a trigger file or a signal:

- ``RUN/capture.trigger``: its text is either a number K, or ``key=value`` lines: ``steps=K``,
  optionally ``start_step=S`` (the first step to keep; a rank already past it starts at its next
  step) and ``id=NAME`` (the capture's name). The writer thread of every rank looks at the
  file's identity (mtime, inode, size) at each poll (at most 100 ms apart); a new identity is a
  new request. A trigger file already there when the trace starts is not one.
- The capture signal (SIGUSR2 unless configured otherwise): a request for the trigger file's K
  when the file is new, else for the trace's default number of steps.

The capture keeps steps S .. S + K - 1 (S: start_step, or the rank's next step): every event
that overlaps them, and the step markers S .. S + K, in ``RUN/captures/<id>/`` (part files while
it runs, ``<stem>.parquet`` when it ends, and a run.json entry: the rank's entry of the run with
the capture's facts), a run directory that `stallscope.load` and `stallscope report` read. It
ends once the marker of step S + K was drained and the summary lag has passed (events are
drained when they end), or when the trace stops. A request while a capture runs is ignored
(and reported in run.json).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stallscope._schema import KIND_ID
from stallscope.io import _run_json as run_json
from stallscope.io._event_files import merge_parts, write_atomic
from stallscope.io._run_dir import part_path

TRIGGER_FILE = "capture.trigger"
CAPTURES_DIR = "captures"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_STEPS = 1_000_000
_MAX_PENDING_ROWS = 4_000_000  # events held while waiting for the first step's marker


class TriggerError(ValueError):
    """A trigger file that says no capture (its text is neither K nor key=value lines)."""


@dataclass(frozen=True)
class Request:
    id: str
    steps: int
    start_step: int | None
    source: str  # "file" or "signal"


def parse_trigger(text: str) -> tuple[int, int | None, str | None]:
    """(steps, start_step, id) of a trigger file's text (the module docstring)."""
    text = text.strip()
    if text.isdigit():
        pairs = {"steps": text}
    else:
        pairs = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, eq, value = line.partition("=")
            if not eq:
                raise TriggerError(f"line {line!r} is not key=value")
            pairs[key.strip()] = value.strip()
    unknown = set(pairs) - {"steps", "start_step", "id"}
    if unknown:
        raise TriggerError(f"unknown key(s) {sorted(unknown)}: use steps, start_step, id")
    try:
        steps = int(pairs["steps"])
        start = int(pairs["start_step"]) if "start_step" in pairs else None
    except KeyError:
        raise TriggerError("no steps=K") from None
    except ValueError as e:
        raise TriggerError(f"not a whole number: {e}") from None
    if not 1 <= steps <= MAX_STEPS:
        raise TriggerError(f"steps={steps}: use 1 to {MAX_STEPS}")
    ident = pairs.get("id")
    if ident is not None and not _ID_RE.match(ident):
        raise TriggerError(f"id={ident!r}: use letters, digits, '_', '.', '-' (up to 64)")
    return steps, start, ident


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino, st.st_size)


@dataclass
class _Capture:
    """One capture in progress on this rank."""

    request: Request
    dir: Path
    stem: str
    first: int  # first step kept
    end: int  # the marker that ends the last step kept: first + steps
    requested_ns: int
    t_first: int | None = None
    t_end: int | None = None
    pending: list[pa.Table] = field(default_factory=list)
    pending_rows: int = 0
    parts: list[Path] = field(default_factory=list)
    events: int = 0
    events_let_go: int = 0  # held too long before the first step began (over the cap)

    def add(self, table: pa.Table) -> None:
        codes = table.column("kind").combine_chunks().indices.to_numpy(zero_copy_only=False)
        at = np.flatnonzero(codes == KIND_ID["step"])
        if at.size:
            corr = table.column("correlation").to_numpy()[at]
            start = table.column("start_ns").to_numpy()[at]
            for c, s in zip(corr.tolist(), start.tolist(), strict=True):
                if c == self.first and self.t_first is None:
                    self.t_first = s
                elif c == self.end and self.t_end is None:
                    self.t_end = s
        self.pending.append(table)
        self.pending_rows += table.num_rows
        while self.t_first is None and self.pending_rows > _MAX_PENDING_ROWS:
            gone = self.pending.pop(0)
            self.pending_rows -= gone.num_rows
            self.events_let_go += gone.num_rows

    def flush(self, final: bool) -> None:
        """Write the pending events that belong to the capture as a part file."""
        if not self.pending or (self.t_first is None and not final):
            return
        table = pa.concat_tables(self.pending)
        self.pending.clear()
        self.pending_rows = 0
        big = np.iinfo(np.int64).max
        t0 = big if self.t_first is None else self.t_first
        t1 = big if self.t_end is None else self.t_end
        codes = table.column("kind").combine_chunks().indices.to_numpy(zero_copy_only=False)
        corr = table.column("correlation").to_numpy()
        start = table.column("start_ns").to_numpy()
        end = table.column("end_ns").to_numpy()
        marker = (codes == KIND_ID["step"]) & (corr >= self.first) & (corr <= self.end)
        keep = marker | ((end > t0) & (start < t1))
        if not keep.any():
            return
        kept = table.filter(pa.array(keep))
        self.dir.mkdir(parents=True, exist_ok=True)
        path = part_path(self.dir, self.stem, len(self.parts))
        write_atomic(kept, path)
        self.parts.append(path)
        self.events += kept.num_rows

    def over(self, now_ns: int, lag_ns: int) -> bool:
        return self.t_end is not None and now_ns >= self.t_end + lag_ns


class OnDemand:
    """Requests and captures of one traced process (see the module docstring)."""

    def __init__(
        self, run_dir: Path, stem: str, default_steps: int, lag_ns: int, step_index: Any
    ) -> None:
        self.run_dir = run_dir
        self.stem = stem
        self.default_steps = default_steps
        self.lag_ns = lag_ns
        self.step_index = step_index  # () -> the latest step's index
        self.trigger = run_dir / TRIGGER_FILE
        self._seen = _identity(self.trigger)  # a trigger already there is not a request
        self.signalled = False  # set by the signal handler (any thread may read it)
        self.active: _Capture | None = None
        self.done: list[dict[str, Any]] = []
        self.problems: list[str] = []

    # -- requests ---------------------------------------------------------------------------
    def poll(self) -> None:
        """Look for a request (cheap: one stat() of the trigger file)."""
        req = None
        ident = _identity(self.trigger)
        if ident is not None and ident != self._seen:
            self._seen = ident
            req = self._from_file(ident)
        signalled, self.signalled = self.signalled, False
        if req is None and signalled:
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            req = Request(f"signal-{stamp}-{os.getpid()}", self.default_steps, None, "signal")
        if req is None:
            return
        if self.active is not None:
            self.problems.append(
                f"capture request {req.id} ({req.source}) ignored: capture "
                f"{self.active.request.id} was still running"
            )
            return
        self._start(req)

    def _from_file(self, ident: tuple[int, int, int]) -> Request | None:
        try:
            steps, start, name = parse_trigger(self.trigger.read_text())
        except (OSError, UnicodeDecodeError, TriggerError) as e:
            self.problems.append(f"{self.trigger}: no capture: {e}")
            return None
        return Request(name or f"t{ident[0]}", steps, start, "file")

    def _start(self, req: Request) -> None:
        nxt = int(self.step_index()) + 1
        first = nxt if req.start_step is None else max(req.start_step, nxt)
        if req.start_step is not None and req.start_step < nxt:
            self.problems.append(
                f"capture {req.id}: step {req.start_step} had begun when the request was seen; "
                f"kept steps {first} .. {first + req.steps - 1} instead"
            )
        self.active = _Capture(
            req,
            self.run_dir / CAPTURES_DIR / req.id,
            self.stem,
            first,
            first + req.steps,
            time.time_ns(),
        )

    # -- events -----------------------------------------------------------------------------
    def add(self, table: pa.Table) -> None:
        if self.active is not None:
            self.active.add(table)

    def tick(self, now_ns: int, final: bool = False) -> None:
        """Write what the capture holds; end it when its last step is complete (or `final`)."""
        c = self.active
        if c is None:
            return
        over = final or c.over(now_ns, self.lag_ns)
        c.flush(final=over)
        if over:
            # at the trace's stop every event was drained: the steps are all there once the
            # marker that ends the last one was seen
            self._finish(c, stopped_early=c.t_end is None)
            self.active = None

    def _finish(self, c: _Capture, stopped_early: bool) -> None:
        path = merge_parts(c.dir, c.stem, c.parts) if c.parts else None
        facts: dict[str, Any] = {
            "id": c.request.id,
            "source": c.request.source,
            "steps_requested": c.request.steps,
            "first_step": c.first,
            "last_step": c.end - 1,
            "requested_realtime_ns": c.requested_ns,
            "events": c.events,
            "complete": not stopped_early,
        }
        if c.events_let_go:
            facts["events_let_go"] = c.events_let_go
        if path is not None:
            entry = dict(run_json.read_run_json(self.run_dir).get("processes", {}).get(c.stem, {}))
            entry.update(status="stopped", file=path.name, events_written=c.events, capture=facts)
            entry.pop("continuous", None)
            run_json.update_process(c.dir, c.stem, entry)
        facts["dir"] = str(c.dir.relative_to(self.run_dir))
        self.done.append(facts)

    def refresh_clocks(self) -> None:
        """At the trace's stop: give the captures the clock offsets measured by then (a
        capture that ended mid-run holds only those of the trace's start)."""
        clock = (run_json.read_run_json(self.run_dir).get("processes", {}).get(self.stem, {})).get(
            "clock"
        )
        if not clock:
            return
        for facts in self.done:
            d = self.run_dir / facts["dir"]
            if (d / run_json.RUN_JSON).exists():
                run_json.update_process(d, self.stem, {"clock": clock})

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"captures": list(self.done)}
        if self.problems:
            out["problems"] = list(self.problems)
        return out
