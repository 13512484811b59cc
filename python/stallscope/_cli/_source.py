"""What a CLI verb reads: a native run directory or PyTorch profiler (Kineto) traces."""

from __future__ import annotations

from pathlib import Path

import click
import polars as pl

_JSON_SUFFIXES = (".json", ".json.gz")


def _is_json(p: Path) -> bool:
    return p.is_file() and p.name.endswith(_JSON_SUFFIXES)


def describe(path: Path) -> str:
    """ "native" for a run directory, "kineto" for Kineto JSON traces; ClickException else."""
    if path.is_dir():
        if any(path.glob("rank-*.parquet")):
            return "native"
        if any(_is_json(p) for p in path.iterdir()):
            return "kineto"
    elif _is_json(path):
        return "kineto"
    elif not path.exists():
        raise click.ClickException(f"{path}: no such file or directory")
    raise click.ClickException(
        f"{path}: neither a stallscope run directory (rank-*.parquet files) nor PyTorch profiler "
        "traces (*.json or *.json.gz, one per rank); pass the out_dir of stallscope.trace() or "
        "the folder of the profiler's trace files"
    )


def load_events(path: Path) -> tuple[pl.DataFrame, str]:
    """(events, kind of source) of `path`: stallscope.load for a run directory,
    stallscope.import_kineto for Kineto traces. Errors become ClickExceptions naming the fix."""
    import stallscope
    from stallscope.exceptions import StallscopeError

    kind = describe(path)
    try:
        if kind == "native":
            return stallscope.load(path), kind
        importer = getattr(stallscope, "import_kineto", None)
        if importer is None:
            raise click.ClickException(
                f"{path} holds Kineto traces, but this stallscope build has no Kineto importer "
                "(stallscope.import_kineto is missing); upgrade stallscope"
            )
        events = importer(path)
        return (events.collect() if isinstance(events, pl.LazyFrame) else events), kind
    except StallscopeError as e:
        raise click.ClickException(str(e)) from None
