"""`stallscope import TRACE... --out RUN_DIR`: Kineto (PyTorch profiler) traces -> a native run
directory (rank-NNNNN.parquet + run.json), so every other command works on them."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import click


def _jsonable(v: Any) -> Any:
    """run.json values: JSON types only (trace metadata is free-form)."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def write_run(imp: Any, out: Path) -> list[Path]:
    """Write a KinetoImport as a run directory; the written event files."""
    import polars as pl

    from stallscope.capture._writer import write_atomic
    from stallscope.io._run_dir import final_path, stem_for, update_process

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rank, meta in imp.ranks.items():
        stem = stem_for(rank)
        path = final_path(out, stem)
        events = imp.events.filter(pl.col("rank") == rank)
        write_atomic(events.to_arrow(), path)
        written.append(path)
        steps = events.filter(pl.col("kind") == "step").height
        update_process(
            out,
            stem,
            {
                "status": "stopped",
                "source": "kineto",
                "source_file": str(meta.path.resolve()),
                "rank": rank,
                "world_size": meta.world_size,
                "pid": int(events["pid"].mode().first() or 0) if events.height else 0,
                "clock": {"source": "kineto", "unit": "ns", "base_ns": meta.base_ns},
                "kineto": _jsonable(
                    {
                        "distributedInfo": meta.distributed_info,
                        "deviceProperties": meta.device_properties,
                        "metadata": meta.metadata,
                        "ts_float": meta.ts_float,
                        "problems": meta.problems,
                    }
                ),
                "events_written": events.height,
                "steps": steps,
                "file": path.name,
            },
        )
    return written


@click.command("import")
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory to write (created; must not hold event files already).",
)
def import_(traces: tuple[Path, ...], out: Path) -> None:
    """Convert Kineto / PyTorch profiler traces (files or folders, .json / .json.gz, one file
    per rank) into a stallscope run directory."""
    from stallscope.exceptions import StallscopeError, StallscopeWarning
    from stallscope.io._run_dir import event_files
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
    written = write_run(imp, out)
    world = imp.world_size
    click.echo(
        f"imported {imp.events.height:,} events of {len(written)} rank(s)"
        f"{f' (world size {world})' if world else ''} into {out}"
    )
