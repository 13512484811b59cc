"""`stallscope profile --out DIR -- COMMAND ...`: trace every rank of an unmodified program."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

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


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory that every rank writes into.",
)
@click.option("--overwrite", is_flag=True, help="Replace ranks' data from an earlier run in --out.")
@click.option(
    "--mode",
    type=click.Choice(["full", "continuous"]),
    default=None,
    help="full: keep every event; continuous: always-on (a rolling window of full events, a "
    "per-step summary, captures on request). Default: STALLSCOPE_MODE, else full.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def profile(out: Path, overwrite: bool, mode: str | None, command: tuple[str, ...]) -> None:
    """Trace COMMAND with no change to it, e.g.

        stallscope profile --out runs/ddp -- torchrun --nproc-per-node 2 train.py

    Every rank records its steps, collectives, DDP buckets, topology and clock offsets into
    --out; the exit status is COMMAND's."""
    import stallscope

    out.mkdir(parents=True, exist_ok=True)
    site = Path(tempfile.mkdtemp(prefix="stallscope-profile-"))
    try:
        env = dict(os.environ)
        env.update(profile_env(out, site, launcher=launcher_mode(command), overwrite=overwrite))
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
    finally:
        shutil.rmtree(site, ignore_errors=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            info = stallscope.run_info(out)
    except stallscope.RunDirError as e:
        click.echo(f"stallscope profile: {e}", err=True)
        sys.exit(rc or 1)
    click.echo(
        f"stallscope profile: {len(info.ranks)} rank(s) traced into {out}"
        + (f" (world size {info.world_size})" if info.world_size else ""),
        err=True,
    )
    for p in info.problems:
        click.echo(f"  problem: {p}", err=True)
    sys.exit(rc)
