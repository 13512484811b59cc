"""`stallscope profile --out DIR -- COMMAND ...`: trace every rank of an unmodified program."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import click

from stallscope.capture._launch import profile_env


def launcher_mode(command: tuple[str, ...]) -> bool:
    """True when COMMAND is torchrun (or python -m torch.distributed.run / .launch): then only
    the processes it starts with a RANK are traced, not the launcher itself."""
    if not command:
        return False
    if Path(command[0]).name.startswith("torchrun"):
        return True
    args = list(command)
    for i, a in enumerate(args[:-1]):
        if a == "-m" and args[i + 1] in ("torch.distributed.run", "torch.distributed.launch"):
            return True
    return False


def _run_files(out: Path) -> list[Path]:
    """An earlier run's files in `out`: event files (final and part), run.json, a continuous
    trace's summary/ and captures/ folders and its capture.trigger."""
    from stallscope.capture._on_demand import CAPTURES_DIR, TRIGGER_FILE
    from stallscope.io._run_dir import FILE_RE
    from stallscope.io._summary_files import summary_dir

    if not out.is_dir():
        return []
    found = sorted(p for p in out.iterdir() if FILE_RE.match(p.name))
    for extra in (out / "run.json", summary_dir(out), out / CAPTURES_DIR, out / TRIGGER_FILE):
        if extra.exists():
            found.append(extra)
    return found


def clear_run(out: Path) -> list[Path]:
    """Remove an earlier run's files from `out` (those of _run_files; nothing else)."""
    gone = _run_files(out)
    for f in gone:
        if f.is_dir():
            shutil.rmtree(f)
        else:
            f.unlink()
    return gone


def earlier_run(out: Path) -> str | None:
    """What in `out` belongs to an earlier run (None when nothing does)."""
    files = [p.name + ("/" if p.is_dir() else "") for p in _run_files(out)]
    if not files:
        return None
    more = f" and {len(files) - 3} more" if len(files) > 3 else ""
    return ", ".join(files[:3]) + more


def read_statuses(folder: Path) -> list[dict[str, Any]]:
    """What each process that should trace said (stallscope.capture._launch writes them)."""
    out = []
    for f in sorted(folder.glob("*.json")):
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, ValueError) as e:
            out.append({"pid": f.stem, "traced": False, "why": f"unreadable status ({e})"})
    return out


def _who(s: dict[str, Any]) -> str:
    return f"rank {s['rank']}" if s.get("rank") is not None else f"process {s.get('pid')}"


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Trace every rank of an unchanged program (torchrun ...).",
)
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory that every rank writes into (created with its parents).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Delete an earlier run's files in --out (event files, run.json, summary/, captures/).",
)
@click.option(
    "--mode",
    type=click.Choice(["full", "continuous"]),
    default=None,
    help="full: keep every event; continuous: always-on (a rolling window of full events, a "
    "per-step summary, captures on request). Default: STALLSCOPE_MODE, else full.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def profile(out: Path, overwrite: bool, mode: str | None, command: tuple[str, ...]) -> None:
    """Trace COMMAND with no change to it:

    \b
        stallscope profile -o runs/ddp -- torchrun --nproc-per-node 2 train.py

    Every rank records its steps (found from the optimizer's steps, torch.profiler's steps or
    the model's forward), forward / backward / optimizer compute, collectives, DDP buckets,
    topology and clock offsets into --out.

    Exit status: COMMAND's when it failed; 1 when it succeeded but a process was not traced
    (the reason is printed); 0 otherwise."""
    import stallscope

    earlier = earlier_run(out)
    if earlier and not overwrite:
        raise click.ClickException(
            f"{out} already holds a run ({earlier}); choose a new --out directory, or pass "
            "--overwrite to replace it"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        if earlier:
            clear_run(out)
    except OSError as e:
        raise click.ClickException(f"cannot prepare the run directory {out}: {e}") from None
    site = Path(tempfile.mkdtemp(prefix="stallscope-profile-"))
    status = site / "status"
    try:
        status.mkdir()
        env = dict(os.environ)
        env.update(
            profile_env(
                out, site, launcher=launcher_mode(command), overwrite=overwrite, status=status
            )
        )
        if mode is not None:
            env["STALLSCOPE_MODE"] = mode
        try:
            proc = subprocess.Popen(list(command), env=env)
        except OSError as e:
            raise click.ClickException(f"cannot start {command[0]!r}: {e}") from None

        def forward(signum: int, _frame: object) -> None:
            proc.send_signal(signum)

        old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            rc = proc.wait()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        statuses = read_statuses(status)
    finally:
        shutil.rmtree(site, ignore_errors=True)
    sys.exit(_summarize(out, command, rc, statuses, stallscope))


def _summarize(
    out: Path, command: tuple[str, ...], rc: int, statuses: list[dict[str, Any]], ss: Any
) -> int:
    """Print what was traced and why not; the exit status."""
    failed = [s for s in statuses if not s.get("traced")]
    for s in failed:
        click.echo(f"stallscope profile: {_who(s)} was not traced: {s.get('why')}", err=True)
    if rc != 0:
        click.echo(f"stallscope profile: {command[0]} exited with status {rc}", err=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            info = ss.run_info(out)
    except ss.RunDirError as e:
        if not statuses:
            why = (
                "no process was traced: COMMAND started no Python process, or stallscope could "
                "not be imported in it (is it installed in the interpreter COMMAND runs?)"
            )
        elif not failed:
            why = (
                f"nothing was recorded: the traced process(es) ran no model forward, optimizer "
                f"step, collective or stallscope region ({e})"
            )
        else:
            why = str(e)
        click.echo(f"stallscope profile: {why}", err=True)
        return rc or 1
    click.echo(
        f"stallscope profile: {len(info.ranks)} rank(s) traced into {out}"
        + (f" (world size {info.world_size})" if info.world_size else ""),
        err=True,
    )
    from stallscope.cli._source import steps_found

    for line in steps_found(info):
        click.echo(f"  steps: {line}", err=True)
    for p in info.problems:
        click.echo(f"  problem: {p}", err=True)
    if rc != 0:
        return rc
    if failed or info.missing_ranks or info.unfinished:
        click.echo("stallscope profile: the run is incomplete (see above)", err=True)
        return 1
    if not statuses:
        click.echo("stallscope profile: no process reported tracing", err=True)
        return 1
    return 0
