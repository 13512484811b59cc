"""`stallscope bench ...`: micro-benchmarks. `bench comm`: collectives with nccl-tests semantics
over torch.distributed, and their alpha-beta calibration. Other `bench` subcommands go here too."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click


@click.group(short_help="Micro-benchmarks: collectives' bandwidth and alpha-beta fits.")
def bench() -> None:
    """Micro-benchmarks of the machine stallscope models (communication, ...)."""


def _human(n: int) -> str:
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}"
    return str(n)


def _size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    from stallscope.comm import parse_size

    try:
        return parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _bytes_or_zero(value: str | None, default: int) -> int:
    from stallscope.comm import parse_size

    if value is None:
        return default
    return 0 if value.strip() == "0" else parse_size(value)


def results_table(report: dict[str, Any]) -> Any:
    """The report's rows for display: µs and GB/s (10^9 B/s)."""
    import polars as pl

    from stallscope.comm import results_frame

    df = results_frame(report)
    return df.select(
        "collective",
        "tier",
        "place",
        pl.col("group_size").alias("ranks"),
        pl.col("bytes").map_elements(_human, return_dtype=pl.String).alias("size"),
        "count",
        "iters",
        (pl.col("time_ns") / 1e3).round(1).alias("time_us"),
        (pl.col("time_min_ns") / 1e3).round(1).alias("min_us"),
        (pl.col("time_max_ns") / 1e3).round(1).alias("max_us"),
        (pl.col("block_median_ns") / 1e3).round(1).alias("block_med_us"),
        (pl.col("runq_wait_ns") / pl.col("time_ns") * 100).round(1).alias("cpu_wait_%"),
        (pl.col("algbw_Bps") / 1e9).round(4).alias("algbw_GBps"),
        (pl.col("busbw_Bps") / 1e9).round(4).alias("busbw_GBps"),
        pl.when(pl.col("check_error").is_null())
        .then(pl.lit(""))
        .when(pl.col("check_error") == 0)
        .then(pl.lit("ok"))
        .otherwise(pl.format("FAIL {}", pl.col("check_error")))
        .alias("check"),
    )


# Decimals shown per float column of the two tables (the rounding above).
RESULT_DIGITS = {"algbw_GBps": 4, "busbw_GBps": 4} | dict.fromkeys(
    ("time_us", "min_us", "max_us", "block_med_us", "cpu_wait_%"), 1
)
FIT_DIGITS = {"alpha_us": 1, "bw_GBps": 4, "bw_Gbitps": 4, "r2": 5, "max_err_%": 2, "mean_err_%": 2}


#: A rank that waits for a CPU longer than this share of an operation's time is not measuring the
#: network alone (1gbit on the shared 2-core test bed without --realtime: up to 128 %).
CONTENTION_LIMIT = 0.10


def contention_warning(report: dict[str, Any], limit: float = CONTENTION_LIMIT) -> str | None:
    """A warning when, at some size, a rank spent more than ``limit`` of an operation's time
    runnable but waiting for a CPU (other processes share its cores), else None."""
    worst: tuple[float, dict[str, Any]] | None = None
    for r in report.get("results", []):
        wait, t = r.get("runq_wait_ns"), r.get("time_ns")
        if wait is None or not t:
            continue
        share = wait / t
        if share > limit and (worst is None or share > worst[0]):
            worst = (share, r)
    if worst is None:
        return None
    share, r = worst
    return (
        f"warning: ranks waited for a CPU for up to {share * 100:.0f} % of an operation's time "
        f"({r['collective']} {_human(r['bytes'])}): other processes compete for the cores, so "
        "these times include scheduling delays, not only the network. Run on idle machines, or "
        "on the test bed with `stallscope testbed --realtime`."
    )


def fits_table(fits: Any) -> Any:
    import polars as pl

    return fits.select(
        "collective",
        "tier",
        "place",
        pl.col("group_size").alias("ranks"),
        (pl.col("alpha_s") * 1e6).round(1).alias("alpha_us"),
        (pl.col("bandwidth_Bps") / 1e9).round(4).alias("bw_GBps"),
        (pl.col("bandwidth_Bps") * 8 / 1e9).round(4).alias("bw_Gbitps"),
        pl.col("r2").round(5),
        (pl.col("max_rel_error") * 100).round(2).alias("max_err_%"),
        (pl.col("mean_rel_error") * 100).round(2).alias("mean_err_%"),
        "points",
        pl.when(pl.col("alpha_clipped"))
        .then(pl.lit("yes"))
        .otherwise(pl.lit(""))
        .alias("alpha_clipped"),
    )


@bench.command("comm", short_help="Collectives: time, algbw, busbw per size (nccl-tests).")
@click.option(
    "-c",
    "--collective",
    "collectives",
    default="all_reduce",
    show_default=True,
    help="Comma-separated: all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, "
    "send_recv, or 'all'.",
)
@click.option("-b", "--min-bytes", default="1K", show_default=True, callback=_size)
@click.option("-e", "--max-bytes", default="16M", show_default=True, callback=_size)
@click.option(
    "-f", "--factor", type=click.FloatRange(1.0, min_open=True), default=2.0, show_default=True
)
@click.option("-w", "--warmup", type=click.IntRange(0, 10_000), default=2, show_default=True)
@click.option("-n", "--iters", type=click.IntRange(1, 100_000), default=10, show_default=True)
@click.option(
    "--place", type=click.Choice(["in", "out", "both"]), default="both", show_default=True
)
@click.option("--dtype", default="float32", show_default=True)
@click.option(
    "--backend", type=click.Choice(["auto", "gloo", "nccl"]), default="auto", show_default=True
)
@click.option(
    "--tier",
    type=click.Choice(["world", "intra", "inter", "tiers"]),
    default=None,
    help="Group to measure: every rank (world), the ranks of node 0 (intra), one rank per node "
    "(inter), or both tiers (tiers; the default with --calibrate, else world).",
)
@click.option(
    "--nprocs",
    type=click.IntRange(1, 1024),
    default=None,
    help="Spawn this many local ranks (default: join the job of torchrun / `stallscope testbed` "
    "when its environment is set, else 2).",
)
@click.option(
    "--max-seconds-per-size",
    type=click.FloatRange(0.0, min_open=True),
    default=10.0,
    show_default=True,
    help="Rank 0 lowers --iters so that one size takes at most this long.",
)
@click.option(
    "--min-seconds-per-size",
    type=click.FloatRange(0.0),
    default=None,
    help="Rank 0 raises --iters so that one size lasts at least this long "
    "(default 0; 0.3 with --calibrate).",
)
@click.option(
    "--min-bytes-per-size",
    default=None,
    help="... and moves at least this many bytes (default 0; 5M with --calibrate).",
)
@click.option(
    "--warmup-bytes",
    default=None,
    help="Warm up with at least this many bytes (default 0; 1M with --calibrate: drains a "
    "shaped link's token bucket).",
)
@click.option("--check", is_flag=True, help="Verify each collective's result once per size.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option(
    "--calibrate",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Fit alpha-beta per collective and link tier and write this calibration file.",
)
@click.option("--min-fit-bytes", default="64K", show_default=True, callback=_size)
@click.option("--timeout", type=click.FloatRange(1.0), default=600.0, show_default=True)
def comm(
    collectives: str,
    min_bytes: int,
    max_bytes: int,
    factor: float,
    warmup: int,
    iters: int,
    place: str,
    dtype: str,
    backend: str,
    tier: str | None,
    nprocs: int | None,
    max_seconds_per_size: float,
    min_seconds_per_size: float | None,
    min_bytes_per_size: str | None,
    warmup_bytes: str | None,
    check: bool,
    json_out: Path | None,
    calibrate: Path | None,
    min_fit_bytes: int,
    timeout: float,
) -> None:
    """Collective bandwidth with nccl-tests semantics (time, algbw, busbw per size)."""
    import orjson

    from stallscope.cli._paths import output_file, write_error
    from stallscope.cli.render import print_frame
    from stallscope.comm import COLLECTIVES, SweepConfig, launch_local, run_worker

    for f in (json_out, calibrate):
        if f is not None:
            output_file(f)  # before the sweep: a bad path fails now, not after minutes
    cal = calibrate is not None
    try:
        min_b = _bytes_or_zero(min_bytes_per_size, 5 << 20 if cal else 0)
        warm_b = _bytes_or_zero(warmup_bytes, 1 << 20 if cal else 0)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    min_s = min_seconds_per_size if min_seconds_per_size is not None else (0.3 if cal else 0.0)

    names = (
        tuple(COLLECTIVES)
        if collectives.strip() == "all"
        else tuple(c.strip() for c in collectives.split(",") if c.strip())
    )
    tier = tier or ("tiers" if calibrate else "world")
    tiers = {
        "world": ("world",),
        "intra": ("intra_node",),
        "inter": ("inter_node",),
        "tiers": ("intra_node", "inter_node"),
    }[tier]
    cfg = SweepConfig(
        collectives=names,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        factor=factor,
        warmup=warmup,
        iters=iters,
        places=("in", "out") if place == "both" else (place,),
        dtype=dtype,
        max_seconds_per_size=max_seconds_per_size,
        min_seconds_per_size=min_s,
        min_bytes_per_size=min_b,
        warmup_bytes=warm_b,
        check=check,
        tiers=tiers,
        backend=backend,
        timeout_s=timeout,
    )
    try:
        cfg.validate()
    except ValueError as e:
        raise click.UsageError(str(e)) from None

    in_job = nprocs is None and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ
    try:
        if in_job:
            rank0 = os.environ.get("RANK", "0") == "0"

            def progress(row: Any) -> None:
                click.echo(
                    f"  {row.collective} {row.tier} {row.place} {_human(row.bytes)}: "
                    f"{row.time_ns / 1e3:.1f} us, busbw {row.busbw_Bps / 1e9:.4f} GB/s",
                    err=True,
                )

            report = run_worker(cfg, on_row=progress if rank0 else None)
        else:
            report = launch_local(cfg, nprocs or 2)
    except (RuntimeError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    if report is None:
        return  # not rank 0: rank 0 prints and writes
    print_frame(
        results_table(report),
        title=f"bench comm: {report['backend']}, {report['world_size']} rank(s) on "
        f"{report['nnodes']} node(s)",
        digits=RESULT_DIGITS,
    )
    note = contention_warning(report)
    if note is not None:
        click.echo(note, err=True)
    fail = [r for r in report["results"] if r.get("check_error") not in (None, 0.0)]
    if json_out is not None:
        try:
            json_out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
        except OSError as e:
            raise write_error(json_out, e) from None
        click.echo(f"results: {json_out}")
    if calibrate is not None:
        from stallscope.comm import write_calibration

        try:
            fits = write_calibration(calibrate, report, min_fit_bytes)
        except ValueError as e:
            raise click.ClickException(str(e)) from None
        except OSError as e:
            raise write_error(calibrate, e) from None
        print_frame(
            fits_table(fits),
            title=f"alpha-beta fits (sizes >= {_human(min_fit_bytes)})",
            digits=FIT_DIGITS,
        )
        click.echo(f"calibration: {calibrate}")
    if fail:
        click.echo(f"{len(fail)} result check(s) FAILED", err=True)
        sys.exit(1)
