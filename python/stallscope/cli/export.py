"""`stallscope export RUN --perfetto OUT`: one trace JSON for ui.perfetto.dev."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(short_help="Write a run as one Perfetto trace, a stalls track per rank.")
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--perfetto",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Chrome / Perfetto trace JSON to write (.json, or .json.gz compressed); missing "
    "folders are created.",
)
@click.option("--stalls/--no-stalls", default=True, show_default=True, help="Add the stall tracks.")
def export(run: Path, out: Path, stalls: bool) -> None:
    """Write every rank of RUN (a run directory or PyTorch profiler traces) as one trace for
    ui.perfetto.dev: a process per rank, a thread per host thread and GPU stream, and a
    stalls track per rank."""
    from stallscope.cli._paths import output_file, write_error
    from stallscope.cli._source import echo_warnings, load_events
    from stallscope.io._perfetto import write_perfetto

    output_file(out)
    events, source, notes = load_events(run)
    echo_warnings(notes)
    try:
        path = write_perfetto(events, out, stalls=stalls)
    except OSError as e:
        raise write_error(out, e) from None
    click.echo(
        f"wrote {path} ({path.stat().st_size:,} bytes) from {events.height:,} events of {run} "
        f"({source}); open it in https://ui.perfetto.dev"
    )
