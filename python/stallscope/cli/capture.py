"""`stallscope capture RUN --steps K`: every rank of a running continuous trace keeps the full
events of K steps (capture/_on_demand.py), into RUN/captures/<id>/."""

from __future__ import annotations

import math
import os
import signal
import socket
import time
import warnings
from pathlib import Path
from typing import Any

import click


def _running(run: Path) -> dict[str, dict[str, Any]]:
    from stallscope.io._run_json import read_run_json

    procs = read_run_json(run).get("processes", {})
    return {s: p for s, p in procs.items() if p.get("status") == "running"}


def _start_step(run: Path) -> int | None:
    """A step every rank is still before, from the live summary: the latest summarized step
    plus the steps that run while the summary lags behind (its lag, two flushes, a second)."""
    from stallscope import load_summary
    from stallscope.exceptions import StallscopeError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = load_summary(run, last_steps=20)
    except StallscopeError:
        return None
    if rows.height == 0 or rows["step"].null_count() == rows.height:
        return None
    latest = int(rows["step"].max())  # type: ignore[arg-type]
    step_s = float(rows["step_ns"].median()) / 1e9  # type: ignore[arg-type]
    behind_s = 1.0
    for p in _running(run).values():
        opts = ((p.get("continuous") or {}).get("options")) or {}
        behind_s = max(
            behind_s,
            float(opts.get("summary_lag_s") or 0) + 2 * float(p.get("flush_interval_s") or 1) + 1.0,
        )
    return latest + 2 + (math.ceil(behind_s / step_s) if step_s > 0 else 0)


def _done(run: Path, capture_id: str, stems: list[str]) -> list[str]:
    from stallscope.io._run_json import read_run_json

    try:
        got = read_run_json(run / "captures" / capture_id).get("processes", {})
    except Exception:
        return []
    return [s for s in stems if got.get(s, {}).get("status") == "stopped"]


@click.command(short_help="Keep the full events of the next K steps of a continuous trace.")
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--steps", "-k", type=click.IntRange(1, 1_000_000), required=True, help="Steps to keep."
)
@click.option(
    "--start-step",
    type=click.IntRange(1),
    default=None,
    help="First step to keep (default: a step every rank is still before, from the summary).",
)
@click.option("--id", "capture_id", default=None, help="Name of the capture (default: the time).")
@click.option(
    "--signal",
    "send_signal",
    is_flag=True,
    help="Also send the capture signal to the traced processes on this host (they see the "
    "trigger file within 0.1 s without it).",
)
@click.option(
    "--wait",
    type=click.FloatRange(0),
    default=None,
    help="Wait up to this many seconds for every rank to finish the capture.",
)
def capture(
    run: Path,
    steps: int,
    start_step: int | None,
    capture_id: str | None,
    send_signal: bool,
    wait: float | None,
) -> None:
    """Keep the full events of the next STEPS steps of a running continuous trace in RUN,
    without a restart: writes RUN/capture.trigger, which every rank's writer looks at every
    0.1 s; the events land in RUN/captures/<id>/ (a run directory: stallscope report it)."""
    from stallscope.capture._on_demand import CAPTURES_DIR, TRIGGER_FILE, parse_trigger

    running = _running(run)
    if not running:
        raise click.ClickException(
            f"{run}: no traced process is running (run.json lists none with status 'running')"
        )
    if not any((p.get("mode") == "continuous") for p in running.values()):
        raise click.ClickException(
            f"{run}: its traces run in mode 'full' (every event is kept already); captures are "
            "for continuous traces: STALLSCOPE_MODE=continuous or trace(..., mode='continuous')"
        )
    capture_id = capture_id or time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{os.getpid()}"
    first = start_step if start_step is not None else _start_step(run)
    text = f"steps={steps}\nid={capture_id}\n" + (f"start_step={first}\n" if first else "")
    try:
        parse_trigger(text)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    trigger = run / TRIGGER_FILE
    tmp = run / f".{TRIGGER_FILE}.{os.getpid()}.tmp"
    tmp.write_text(text)
    os.replace(tmp, trigger)  # ranks see the whole file or none of it
    where = run / CAPTURES_DIR / capture_id
    click.echo(
        f"capture {capture_id}: {steps} step(s)"
        + (f" from step {first}" if first else " from each rank's next step")
        + f" of {len(running)} running process(es) into {where}"
    )
    if send_signal:
        _signal(running)
    if wait is None:
        return
    stems = sorted(running)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if len(_done(run, capture_id, stems)) == len(stems):
            click.echo(f"capture {capture_id}: done, {len(stems)} rank(s): {where}")
            return
        time.sleep(0.2)
    done = _done(run, capture_id, stems)
    raise click.ClickException(
        f"capture {capture_id}: {len(done)} of {len(stems)} process(es) done after {wait:g} s; "
        f"the others are still before or inside the captured steps (see {where})"
    )


def _signal(running: dict[str, dict[str, Any]]) -> None:
    host = socket.gethostname()
    for stem, p in sorted(running.items()):
        opts = ((p.get("continuous") or {}).get("options")) or {}
        name = opts.get("capture_signal")
        pid = p.get("pid")
        if not name or not isinstance(pid, int):
            continue
        if p.get("host") != host:
            click.echo(
                f"  {stem}: on host {p.get('host')}, not signalled (the trigger file reaches it)"
            )
            continue
        try:
            os.kill(pid, int(signal.Signals[name]))
        except (ProcessLookupError, PermissionError, KeyError) as e:
            click.echo(f"  {stem}: pid {pid} not signalled: {e}", err=True)
