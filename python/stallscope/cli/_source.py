"""What a CLI verb reads: a native run directory or PyTorch profiler (Kineto) traces."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
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


@dataclass
class Loaded:
    """A run as a verb reads it: its events and what to say about them."""

    path: Path
    events: pl.DataFrame
    source: str  # "native" (a run directory) or "kineto" (profiler traces)
    notes: list[str]  # warnings raised while loading, a line each
    world_size: int | None = None
    coverage: str | None = None  # "3 of 16 ranks' traces (ranks 0-2)" for part of a job
    steps_found: list[str] = field(default_factory=list)  # how the steps were found, in words

    @property
    def ranks(self) -> list[int]:
        if not self.events.height:
            return []
        return sorted(int(r) for r in self.events["rank"].drop_nulls().unique().to_list())


def load_run(path: Path) -> Loaded:
    """`path` read: stallscope.load for a run directory, stallscope.read_kineto for Kineto
    traces. The warnings raised while loading (a missing rank, rows dropped and why) are
    returned for the verb to show its way, not printed by Python's warning machinery. Errors
    become ClickExceptions naming the fix."""
    import stallscope
    from stallscope._utils.text import ranks_text
    from stallscope.exceptions import StallscopeError

    kind = describe(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if kind == "native":
                events = stallscope.load(path)
                info = stallscope.run_info(path)
                world, coverage, found = info.world_size, info.coverage, steps_found(info)
            else:
                imp = stallscope.read_kineto(path)
                events, world = imp.events, imp.world_size
                have = sorted(imp.ranks)
                coverage = None
                if world and len(have) < world:
                    coverage = f"{len(have)} of {world} ranks' traces ({ranks_text(have)})"
                found = [_steps_found_text(None, imported=True)]
        except StallscopeError as e:
            raise click.ClickException(str(e)) from None
    notes = [str(w.message) for w in caught]
    return Loaded(path, events, kind, notes, world, coverage, found)


def _steps_found_text(source: object, imported: bool = False) -> str:
    from stallscope.io._load import describe_step_source

    return describe_step_source(source, imported) or "marked in the trace"


def steps_found(info: object) -> list[str]:
    """How each process's steps were found, one line per distinct way (with its ranks when the
    ways differ)."""
    from stallscope._utils.text import ranks_text
    from stallscope.io._load import RunInfo

    assert isinstance(info, RunInfo)
    by: dict[str, list[int]] = {}
    for p in info.processes.values():
        text = _steps_found_text(p.get("step_source"), imported=p.get("source") == "kineto")
        rank = p.get("rank")
        by.setdefault(text, []).extend([rank] if isinstance(rank, int) else [])
    if len(by) <= 1:
        return list(by)
    return [f"{t} ({ranks_text(r)})" for t, r in by.items()]


def load_events(path: Path) -> tuple[pl.DataFrame, str, list[str]]:
    """(events, kind of source, warnings) of `path` (see load_run)."""
    run = load_run(path)
    return run.events, run.source, run.notes


def echo_warnings(notes: list[str]) -> None:
    """The loading warnings on stderr, a line each."""
    for n in notes:
        click.echo(f"warning: {n}", err=True)
