"""`stallscope import TRACE... --out RUN_DIR`: Kineto (PyTorch profiler) traces -> a native run
directory (rank-NNNNN.parquet + run.json), so every other command works on them."""

from __future__ import annotations

import warnings
from pathlib import Path

import click


@click.command(
    "import", short_help="Convert PyTorch profiler (Kineto) traces into a run directory."
)
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o",
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory to write (created with its parents; must not hold event files already).",
)
def import_(traces: tuple[Path, ...], out: Path) -> None:
    """Convert Kineto / PyTorch profiler traces (files or folders, .json / .json.gz, one file
    per rank) into a stallscope run directory."""
    from stallscope.cli._paths import output_dir, write_error
    from stallscope.exceptions import StallscopeError, StallscopeWarning
    from stallscope.io._run_dir import event_files
    from stallscope.io._write_run import write_run
    from stallscope.io.kineto import read_kineto

    if out.exists() and event_files(out):
        raise click.ClickException(f"{out} already holds event files; choose a new --out directory")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StallscopeWarning)
        try:
            imp = read_kineto(list(traces))
        except StallscopeError as e:
            raise click.ClickException(str(e)) from None
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)
    output_dir(out)
    try:
        written = write_run(imp, out)
    except OSError as e:
        raise write_error(out, e) from None
    world = imp.world_size
    click.echo(
        f"imported {imp.events.height:,} events of {len(written)} rank(s)"
        f"{f' (world size {world})' if world else ''} into {out}"
    )
