"""`stallscope export RUN --perfetto OUT`: one trace JSON for ui.perfetto.dev."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--perfetto",
    "out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    required=True,
    help="Chrome / Perfetto trace JSON to write (.json, or .json.gz compressed).",
)
@click.option("--stalls/--no-stalls", default=True, show_default=True, help="Add the stall tracks.")
def export(run: Path, out: Path, stalls: bool) -> None:
    """Write every rank of RUN (a run directory or PyTorch profiler traces) as one trace for
    ui.perfetto.dev: a process per rank, a thread per host thread and GPU stream, and a
    stalls track per rank."""
    from stallscope.cli._source import echo_warnings, load_events
    from stallscope.io._perfetto import write_perfetto

    events, source, notes = load_events(run)
    echo_warnings(notes)
    path = write_perfetto(events, out, stalls=stalls)
    click.echo(
        f"wrote {path} ({path.stat().st_size:,} bytes) from {events.height:,} events of {run} "
        f"({source}); open it in https://ui.perfetto.dev"
    )
