"""`stallscope analyze -- python train.py`: the differential stall method (synthetic / cached /
cold data; 1 device / G devices in one node / G devices over N emulated nodes), beside the
trace-based stall table of the same runs."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click
import orjson
import polars as pl

from stallscope.cli.render import MS, label


def _runs_table(runs: pl.DataFrame) -> pl.DataFrame:
    from stallscope.analysis import STALL_COLUMNS

    cats = [c for c in STALL_COLUMNS if runs.height and float(runs[c].abs().max()) > 0]  # type: ignore[arg-type]
    return runs.select(
        "run",
        "ranks",
        "nodes",
        "steps",
        (pl.col("step_ns") / MS).alias("step_ms"),
        *[(pl.col(c) / MS).alias(c.removesuffix("_ns") + "_ms") for c in cats],
    )


def _stalls_table(stalls: pl.DataFrame) -> pl.DataFrame:
    name = (
        pl.when(pl.col("rate").is_null())
        .then(pl.col("stall"))
        .otherwise(pl.col("stall") + "@" + pl.col("rate"))
    )
    return stalls.select(
        name.alias("stall"),
        (pl.col("ns_per_step") / MS).alias("diff_ms"),
        (pl.col("ns_per_sample") / 1e3).alias("diff_us_sample"),
        pl.col("share_pct").alias("diff_pct"),
        (pl.col("trace_ns_per_step") / MS).alias("trace_ms"),
        (pl.col("trace_ns_per_sample") / 1e3).alias("trace_us_sample"),
        pl.col("trace_share_pct").alias("trace_pct"),
        pl.col("disagreement_pct_points").alias("gap_pp"),
        (pl.col("trace_comm_ns_per_step") / MS).alias("comm_ms"),
    )


_STALL_LABELS = {
    "diff_ms": "differential ms/step",
    "diff_us_sample": "µs/sample",
    "diff_pct": "% of step",
    "trace_ms": "trace ms/step",
    "trace_us_sample": "µs/sample",
    "trace_pct": "% of step",
    "gap_pp": "trace - diff (points)",
    "comm_ms": "trace: comm wait ms/step",
}


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Measure stalls by running a job several ways and subtracting.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the results as JSON (ns, % of step time) to FILE.",
)
@click.option(
    "--steps",
    type=click.IntRange(2, 100_000),
    default=20,
    show_default=True,
    help="Measured steps per run (the warm-up comes on top).",
)
@click.option(
    "--warmup",
    type=click.IntRange(0, 1000),
    default=3,
    show_default=True,
    help="Steps left out at the start of every run.",
)
@click.option(
    "--trim",
    type=click.FloatRange(0.0, 0.49),
    default=0.2,
    show_default=True,
    help="Fraction of the measured steps left out at each end (fastest, slowest) of the "
    "trimmed mean step time.",
)
@click.option(
    "--nodes",
    type=click.IntRange(1, 64),
    default=None,
    help="N: nodes of the network run (default: torchrun's --nnodes, else 2).",
)
@click.option(
    "--ranks-per-node",
    type=click.IntRange(1, 64),
    default=None,
    help="Ranks per node of the network run; G = nodes x ranks-per-node devices run "
    "in one node too (default: torchrun's --nproc-per-node, else 1).",
)
@click.option(
    "--rate",
    "rates",
    multiple=True,
    help="Link rate of the emulated nodes (tc units: 1gbit, 200mbit; 'none': "
    "unshaped); repeat for one network run per rate. Default 1gbit.",
)
@click.option(
    "--cold",
    type=click.Choice(["auto", "drop-caches", "fadvise"]),
    default="auto",
    show_default=True,
    help="How the cold run empties the page cache: drop it all (root), evict the "
    "dataset's files (posix_fadvise), or auto (drop as root, else evict).",
)
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A file or folder the script reads (also STALLSCOPE_DATASET, or the script's "
    "stallscope.data.dataset_files).",
)
@click.option(
    "--skip",
    multiple=True,
    type=click.Choice(["data", "interconnect", "network"]),
    help="Leave a part of the method out.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the runs' traces and logs (default: a new temporary folder).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(10),
    default=300.0,
    show_default=True,
    help="Seconds each run may take.",
)
@click.option(
    "--no-guard",
    is_flag=True,
    help="Skip the noise guard (two probe processes timed side by side against one alone, "
    "before and after the runs, a few seconds each).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def analyze(
    json_path: Path | None,
    steps: int,
    warmup: int,
    trim: float,
    nodes: int | None,
    ranks_per_node: int | None,
    rates: tuple[str, ...],
    cold: str,
    datasets: tuple[Path, ...],
    skip: tuple[str, ...],
    out: Path | None,
    timeout: float,
    no_guard: bool,
    command: tuple[str, ...],
) -> None:
    """Measure stalls by running COMMAND several ways and subtracting (DS-Analyzer, Stash):

    \b
        stallscope analyze -- python train.py
        stallscope analyze --nodes 2 --rate 1gbit --rate 200mbit -- torchrun --nproc-per-node 2 train.py

    prep = T(cached) - T(synthetic), fetch = T(cold) - T(cached), interconnect = T(G devices,
    one node) - T(1 device), network = T(G devices over N nodes) - T(G in one node); each run
    is traced, and the trace-based stall table of the same runs is shown beside.

    The script's contract: wrap its loader in stallscope.data.synthetic(loader) (or read
    STALLSCOPE_DATA=synthetic|real and STALLSCOPE_STEPS and mark steps itself), and declare
    its dataset's files with stallscope.data.dataset_files(...). See docs/analyze.md."""
    from stallscope.cli._paths import output_file, write_error
    from stallscope.cli.render import print_frame
    from stallscope.differential import Settings, entry_of, result_json
    from stallscope.differential import analyze as run_method
    from stallscope.exceptions import AnalyzeError, StallscopeError

    if json_path is not None:
        output_file(json_path)  # before the runs: a bad path fails now, not after minutes
    try:
        entry = entry_of(command)
        settings = Settings(
            nodes=nodes or entry.nodes or 2,
            ranks_per_node=ranks_per_node or entry.ranks_per_node or 1,
            rates=rates or ("1gbit",),
            steps=steps,
            warmup=warmup,
            trim=trim,
            cold=cold,
            dataset=datasets,
            skip=skip,
            timeout_s=timeout,
            guard=not no_guard,
        )
        where = out if out is not None else Path(tempfile.mkdtemp(prefix="stallscope-analyze-"))
        where.mkdir(parents=True, exist_ok=True)
        click.echo(
            f"analyze: G = {settings.devices} device(s) ({settings.nodes} node(s) x "
            f"{settings.ranks_per_node}), {warmup} + {steps} steps per run, traces in {where}",
            err=True,
        )
        result = run_method(entry, where, settings, progress=lambda m: click.echo(m, err=True))
    except (AnalyzeError, StallscopeError) as e:
        raise click.ClickException(str(e)) from None
    print_frame(
        _runs_table(result.runs),
        title="runs: trace-based stall table, mean per step (ms)",
        digits=2,
        labels={c: label(c.removesuffix("_ms")) for c in _runs_table(result.runs).columns},
    )
    print_frame(
        _stalls_table(result.stalls),
        title="stalls: differential method beside the trace of the same runs",
        digits=2,
        labels=_STALL_LABELS,
    )
    for name, info in result.cache.items():
        click.echo(f"page cache before {name}: {info['method']}")
    g = result.guard
    if "before" in g:
        click.echo(
            f"noise guard (two probes side by side / one alone): before {g['before']:.2f}x, "
            f"after {g['after']:.2f}x"
        )
    if "others_cores" in g:
        click.echo(f"other work on this machine during the runs: {g['others_cores']:.2f} cores")
    for n in result.notes:
        click.echo(f"note: {n}")
    if json_path is not None:
        try:
            json_path.write_bytes(
                orjson.dumps(
                    result_json(result), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
                )
            )
        except OSError as e:
            raise write_error(json_path, e) from None
        click.echo(f"wrote {json_path}", err=True)
    sys.stdout.flush()
