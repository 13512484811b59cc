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

_SITECUSTOMIZE = """\
# Written by `stallscope profile`: start tracing this process, then run any other sitecustomize.
import os as _os
import sys as _sys

try:
    from stallscope.capture._launch import boot as _boot

    _boot()
except Exception as _e:  # never stop the program
    print(f"stallscope profile: not tracing: {_e}", file=_sys.stderr)
_here = _os.path.dirname(_os.path.abspath(__file__))
try:  # run the sitecustomize this one shadows, if any
    import importlib.machinery as _m
    import importlib.util as _u

    _others = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _spec = _m.PathFinder.find_spec("sitecustomize", _others)
    if _spec is not None and _spec.loader is not None:
        _mod = _u.module_from_spec(_spec)
        _spec.loader.exec_module(_mod)
except Exception as _e:
    print(f"stallscope profile: the shadowed sitecustomize failed: {_e}", file=_sys.stderr)
"""


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
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def profile(out: Path, overwrite: bool, command: tuple[str, ...]) -> None:
    """Trace COMMAND with no change to it, e.g.

        stallscope profile --out runs/ddp -- torchrun --nproc-per-node 2 train.py

    Every rank records its steps, collectives, DDP buckets, topology and clock offsets into
    --out; the exit status is COMMAND's."""
    import stallscope

    out.mkdir(parents=True, exist_ok=True)
    site = Path(tempfile.mkdtemp(prefix="stallscope-profile-"))
    try:
        (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
        env["STALLSCOPE_PROFILE_OUT"] = str(out.resolve())
        env["STALLSCOPE_PROFILE_MODE"] = "launcher" if launcher_mode(command) else "process"
        env["STALLSCOPE_PROFILE_OVERWRITE"] = "1" if overwrite else "0"
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
