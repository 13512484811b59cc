"""Continuous mode: always-on tracing at a bounded cost (docs/production.md).

A continuous trace keeps full events only for a rolling window (`_window.py`), writes a small
per-step stall summary as it runs (`_summarizer.py`, files in io/_summary_files.py), and keeps
the full events of the next K steps on request (`_on_demand.py`). This module holds the options
(arguments of stallscope.trace, or the environment under `stallscope profile`) and the part of
the writer thread that drives the three; a problem in any of them switches that one off,
reported in run.json, and never stops the trace.
"""

from __future__ import annotations

import os
import signal
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyarrow is loaded when a trace starts, not with `import stallscope`
    import pyarrow as pa

MODES = ("full", "continuous")
MODE_ENV = "STALLSCOPE_MODE"
ENV = {
    "window_steps": "STALLSCOPE_WINDOW_STEPS",
    "window_s": "STALLSCOPE_WINDOW_S",
    "summary_lag_s": "STALLSCOPE_SUMMARY_LAG_S",
    "capture_signal": "STALLSCOPE_CAPTURE_SIGNAL",
    "capture_steps": "STALLSCOPE_CAPTURE_STEPS",
}
DEFAULT_WINDOW_S = 60.0  # when neither window_steps nor window_s is given
DEFAULT_CAPTURE_STEPS = 10


class OptionError(ValueError):
    """A continuous-mode option out of range (the message names it and the range)."""


@dataclass(frozen=True)
class ContinuousOptions:
    window_steps: int | None
    window_s: float | None
    summary_lag_s: float  # how long after a step ends its row is written
    capture_signal: int | None  # signal number, None: no signal
    capture_steps: int  # steps a signal captures when the trigger file says nothing new
    summary_rows_per_file: int = 1000
    summary_max_events: int = 1_000_000

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.capture_signal is not None:
            d["capture_signal"] = signal.Signals(self.capture_signal).name
        return d


def _signal_number(value: int | str | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        number = value
    else:
        text = value.strip().upper()
        if text in ("", "NONE", "OFF", "0"):
            return None
        if text.isdigit():
            number = int(text)
        else:
            name = text if text.startswith("SIG") else "SIG" + text
            try:
                number = int(signal.Signals[name])
            except KeyError:
                raise OptionError(
                    f"capture_signal={value!r}: not a signal name; use e.g. SIGUSR2, or None"
                ) from None
    try:
        sig = signal.Signals(number)
    except ValueError:
        raise OptionError(f"capture_signal={value!r}: no such signal") from None
    if sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, signal.SIGINT):
        raise OptionError(
            f"capture_signal={sig.name}: cannot be used (it stops or ends the process); use "
            "SIGUSR1, SIGUSR2 or another spare signal"
        )
    return number


def _env(name: str, env: Mapping[str, str]) -> str | None:
    v = env.get(ENV[name])
    return v if v not in (None, "") else None


def continuous_options(
    mode: str | None,
    *,
    window_steps: int | None = None,
    window_s: float | None = None,
    summary_lag_s: float | None = None,
    capture_signal: int | str | None = "SIGUSR2",
    capture_steps: int | None = None,
    flush_interval: float = 1.0,
    env: Mapping[str, str] | None = None,
) -> ContinuousOptions | None:
    """The options of a continuous trace (None for mode "full"). `mode` None: the environment's
    STALLSCOPE_MODE, else "full". The other options not given come from the environment
    (`ENV`), then the defaults. OptionError names an option out of range."""
    env = os.environ if env is None else env
    mode = mode if mode is not None else (env.get(MODE_ENV) or "full")
    if mode not in MODES:
        raise OptionError(f"mode={mode!r}: use one of {list(MODES)}")
    if mode == "full":
        given = [
            n for n, v in (("window_steps", window_steps), ("window_s", window_s)) if v is not None
        ]
        if given:
            raise OptionError(f"{', '.join(given)} need mode='continuous'")
        return None
    try:
        if window_steps is None and (v := _env("window_steps", env)) is not None:
            window_steps = int(v)
        if window_s is None and (v := _env("window_s", env)) is not None:
            window_s = float(v)
        if summary_lag_s is None and (v := _env("summary_lag_s", env)) is not None:
            summary_lag_s = float(v)
        if capture_steps is None and (v := _env("capture_steps", env)) is not None:
            capture_steps = int(v)
    except ValueError as e:
        raise OptionError(f"a STALLSCOPE_* continuous-mode variable is not a number: {e}") from None
    if ENV["capture_signal"] in env:
        capture_signal = env[ENV["capture_signal"]]
    if window_steps is None and window_s is None:
        window_s = DEFAULT_WINDOW_S
    if window_steps is not None and not 1 <= window_steps <= 10_000_000:
        raise OptionError(f"window_steps={window_steps}: use 1 to 10000000 steps")
    if window_s is not None and not 0.1 <= window_s <= 7 * 86400:
        raise OptionError(f"window_s={window_s}: use 0.1 to 604800 s")
    lag = summary_lag_s if summary_lag_s is not None else max(2 * flush_interval, 0.2)
    if not 0 <= lag <= 3600:
        raise OptionError(f"summary_lag_s={lag}: use 0 to 3600 s")
    steps = capture_steps if capture_steps is not None else DEFAULT_CAPTURE_STEPS
    if not 1 <= steps <= 1_000_000:
        raise OptionError(f"capture_steps={steps}: use 1 to 1000000")
    return ContinuousOptions(window_steps, window_s, lag, _signal_number(capture_signal), steps)


class Continuous:
    """The writer thread's continuous-mode work: window, summary, on-demand captures."""

    def __init__(
        self,
        opts: ContinuousOptions,
        run_dir: Path,
        stem: str,
        *,
        summary: bool,
        step_index: Callable[[], int],
    ) -> None:
        from stallscope.capture._on_demand import OnDemand
        from stallscope.capture._summarizer import Summarizer
        from stallscope.capture._window import Window
        from stallscope.io._summary_files import SummaryWriter

        self.opts = opts
        lag_ns = int(opts.summary_lag_s * 1e9)
        self.window: Any = Window(opts.window_steps, opts.window_s)
        self.summary: Any = None
        self.summary_off: str | None = None
        if summary:
            out = SummaryWriter(run_dir, stem, opts.summary_rows_per_file)
            self.summary = Summarizer(out, lag_ns, opts.summary_max_events)
        else:
            self.summary_off = "a fork()ed child of a traced process writes no summary"
        self.on_demand: Any = OnDemand(run_dir, stem, opts.capture_steps, lag_ns, step_index)
        self.errors: dict[str, str] = {}

    def _guard(self, part: str, fn: Callable[[], Any]) -> None:
        """Run `fn`; on an exception switch `part` off and remember why (for run.json)."""
        if part in self.errors:
            return
        try:
            fn()
        except Exception as e:  # a problem of this part never stops the trace
            self.errors[part] = f"{type(e).__name__}: {e} | " + "".join(
                traceback.format_exception(e)[-3:]
            ).replace("\n", " ")

    def poll(self) -> None:
        self._guard("capture", self.on_demand.poll)

    def on_chunk(self, table: pa.Table) -> None:
        self._guard("window", lambda: self.window.observe(table))
        if self.summary is not None:
            self._guard("summary", lambda: self.summary.add(table))
        self._guard("capture", lambda: self.on_demand.add(table))

    def on_part(self, path: Path, table: pa.Table, now_ns: int) -> list[Path]:
        """After a part file was written: the parts the window deleted."""
        gone: list[Path] = []

        def expire() -> None:
            self.window.add_part(path, table)
            gone.extend(self.window.expire(now_ns))

        self._guard("window", expire)
        return gone

    def tick(self, now_ns: int, final: bool = False) -> None:
        if self.summary is not None:
            self._guard("summary", lambda: self.summary.tick(now_ns, final))
        self._guard("capture", lambda: self.on_demand.tick(now_ns, final))

    def finish(self, now_ns: int) -> None:
        self.tick(now_ns, final=True)
        self._guard("capture", self.on_demand.refresh_clocks)
        if self.summary is not None:
            self._guard("summary", self.summary.out.roll)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"options": self.opts.as_json(), "window": self.window.stats()}
        if self.summary is not None:
            out["summary"] = self.summary.stats()
        else:
            out["summary"] = {"off": self.summary_off}
        out.update(self.on_demand.stats())
        if self.errors:
            out["errors"] = dict(self.errors)
        return out
