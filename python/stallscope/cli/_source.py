"""What a CLI verb reads: a native run directory or PyTorch profiler (Kineto) traces."""

from __future__ import annotations

import warnings
from pathlib import Path

import click
import polars as pl

_JSON_SUFFIXES = (".json", ".json.gz")


def _is_json(p: Path) -> bool:
    return p.is_file() and p.name.endswith(_JSON_SUFFIXES)


def describe(path: Path) -> str:
    """ "native" for a run directory, "kineto" for Kineto JSON traces, "summary" for a run
    directory with a continuous trace's summary and no event files; ClickException else."""
    if path.is_dir():
        if any(path.glob("rank-*.parquet")):
            return "native"
        if any((path / "summary").glob("rank-*")):
            return "summary"
        if any(_is_json(p) for p in path.iterdir()):
            return "kineto"
    elif _is_json(path):
        return "kineto"
    elif not path.exists():
        raise click.ClickException(f"{path}: no such file or directory")
    raise click.ClickException(
        f"{path}: neither a stallscope run directory (rank-*.parquet files) nor PyTorch profiler "
        "traces (*.json or *.json.gz, one per rank) nor a continuous trace's summary "
        "(summary/rank-*); pass the out_dir of stallscope.trace() or the folder of the "
        "profiler's trace files"
    )


def load_summary_rows(path: Path) -> tuple[pl.DataFrame | None, list[str]]:
    """The run's per-step summary (load_summary) when it has one, else None; with the
    warnings raised while reading it."""
    import stallscope
    from stallscope.exceptions import StallscopeError

    if not (path / "summary").is_dir():
        return None, []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            rows = stallscope.load_summary(path)
        except StallscopeError as e:
            raise click.ClickException(str(e)) from None
    return rows, [str(w.message) for w in caught]


def load_events(path: Path) -> tuple[pl.DataFrame, str, list[str]]:
    """(events, kind of source, warnings) of `path`: stallscope.load for a run directory,
    stallscope.import_kineto for Kineto traces. The warnings raised while loading (a missing
    rank, rows dropped and why) are returned for the verb to show its way, not printed by
    Python's warning machinery. Errors become ClickExceptions naming the fix."""
    import stallscope
    from stallscope.exceptions import StallscopeError

    kind = describe(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            events = stallscope.load(path) if kind == "native" else stallscope.import_kineto(path)
        except StallscopeError as e:
            raise click.ClickException(str(e)) from None
    return events, kind, [str(w.message) for w in caught]


def echo_warnings(notes: list[str]) -> None:
    """The loading warnings on stderr, a line each."""
    for n in notes:
        click.echo(f"warning: {n}", err=True)
