"""`stallscope top RUN`: a running continuous trace's summary, live: steps/s, where the time
of the latest steps goes, the slowest rank."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import click
import polars as pl

from stallscope.cli.render import MS

_COMM = ("sync_wait_ns", "network_ns", "interconnect_ns")
_DATA = ("data_fetch_ns", "data_prep_ns", "data_ns")


def top_view(rows: pl.DataFrame, steps: int) -> dict[str, Any]:
    """What `top` shows, from load_summary's rows: over each rank's latest `steps` steps,
    steps/s (from the median step time), the shares of the step time per category (over the
    steps with device events; None when there is none), and per
    rank its median step time, its shares and how often it was a straggler; the slowest
    rank is the one with the longest median step."""
    real = rows.filter(pl.col("step").is_not_null())
    if real.height == 0:
        return {"ranks": 0}
    recent = real.sort("rank", "start_ns").group_by("rank", maintain_order=True).tail(steps)
    total = int(recent["step_ns"].sum())

    # Shares come from the steps with device events (all of them, unless the trace records
    # device events in windows): the others have no compute, comm or host figures.
    measured = recent.filter(pl.col("device"))

    def share(cols: tuple[str, ...], df: pl.DataFrame = measured) -> float | None:
        t = int(df["step_ns"].sum())
        return sum(int(df[c].sum()) for c in cols) / t if t else None

    dev = pl.col("device")
    dev_ns = pl.col("step_ns").filter(dev).sum()
    per = (
        recent.group_by("rank")
        .agg(
            steps=pl.len(),
            last_step=pl.col("step").max(),
            step_ms=pl.col("step_ns").median() / MS,
            compute=pl.col("compute_ns").filter(dev).sum() / dev_ns,
            comm=pl.sum_horizontal(*_COMM).filter(dev).sum() / dev_ns,
            sync_wait=pl.col("sync_wait_ns").filter(dev).sum() / dev_ns,
            data=pl.sum_horizontal(*_DATA).filter(dev).sum() / dev_ns,
            host=pl.col("host_ns").filter(dev).sum() / dev_ns,
            stragglers=pl.col("straggler").sum(),
        )
        .sort("rank")
    )
    med_step = float(recent["step_ns"].median())  # type: ignore[arg-type]
    slow = per.sort(["step_ms", "rank"], descending=[True, False]).row(0, named=True)
    typical = float(per["step_ms"].median())  # type: ignore[arg-type]
    return {
        "ranks": per.height,
        "latest_step": int(real["step"].max()),  # type: ignore[arg-type]
        "steps_per_s": 1e9 / med_step if med_step > 0 else 0.0,
        "step_ms": med_step / MS,
        "window_steps": steps,
        "device_steps": measured.height,
        "rank_steps": recent.height,
        "shares": {
            "compute": share(("compute_ns",)),
            "memcpy": share(("memcpy_ns",)),
            "comm": share(_COMM),
            "sync_wait": share(("sync_wait_ns",)),
            "network": share(("network_ns",)),
            "interconnect": share(("interconnect_ns",)),
            "data": share(_DATA),
            "host": share(("host_ns",)),
        },
        "total_ns": total,
        "slowest_rank": int(slow["rank"]),
        "slowest_step_ms": float(slow["step_ms"]),
        "slowest_over_median": float(slow["step_ms"]) / typical - 1 if typical > 0 else 0.0,
        "per_rank": per,
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def render(run: Path, view: dict[str, Any], max_rows: int) -> None:
    from stallscope.cli.render import print_frame

    click.echo(f"stallscope top {run}   {time.strftime('%H:%M:%S')}")
    if not view.get("ranks"):
        click.echo("no summarized step yet (rows appear a few seconds after each step ends)")
        return
    s = view["shares"]
    click.echo(
        f"{view['ranks']} rank(s) | latest step {view['latest_step']} | "
        f"{view['steps_per_s']:.2f} steps/s (median step {view['step_ms']:.2f} ms, "
        f"last {view['window_steps']} steps per rank)"
    )
    if view["device_steps"] < view["rank_steps"]:
        click.echo(
            f"device events in {view['device_steps']} of {view['rank_steps']} rank-steps "
            "(the shares below are theirs)"
        )
    click.echo(
        f"compute {_pct(s['compute'])} | memcpy {_pct(s['memcpy'])} | comm {_pct(s['comm'])} "
        f"(sync wait {_pct(s['sync_wait'])}, network {_pct(s['network'])}, interconnect "
        f"{_pct(s['interconnect'])}) | data {_pct(s['data'])} | host {_pct(s['host'])}"
    )
    click.echo(
        f"slowest rank: {view['slowest_rank']} (median step {view['slowest_step_ms']:.2f} ms, "
        f"{100 * view['slowest_over_median']:+.1f}% over the median rank)"
    )
    per = view["per_rank"].with_columns(
        pl.col(c) * 100 for c in ("compute", "comm", "sync_wait", "data", "host")
    )
    print_frame(
        per.select(
            "rank",
            "last_step",
            "step_ms",
            "compute",
            "comm",
            "sync_wait",
            "data",
            "host",
            "stragglers",
        ),
        title="per rank (shares in %)",
        max_rows=max_rows,
        digits=1,
        labels={"last_step": "last step", "step_ms": "step ms", "sync_wait": "sync wait"},
    )


@click.command(short_help="Watch a running continuous trace: steps/s, stalls, slowest rank.")
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--once", is_flag=True, help="Show the summary once and exit.")
@click.option(
    "--steps",
    type=click.IntRange(1, 100_000),
    default=20,
    show_default=True,
    help="The latest steps of each rank that the figures cover.",
)
@click.option(
    "--interval",
    type=click.FloatRange(0.1),
    default=1.0,
    show_default=True,
    help="Seconds between refreshes.",
)
@click.option(
    "--straggler-pct",
    type=click.FloatRange(0),
    default=10.0,
    show_default=True,
    help="A straggler's step is this many % over the step's median across ranks.",
)
@click.option("--max-rows", type=click.IntRange(1), default=40, show_default=True)
def top(
    run: Path, once: bool, steps: int, interval: float, straggler_pct: float, max_rows: int
) -> None:
    """Watch a running continuous trace (its per-step summary in RUN/summary/): steps/s,
    stall shares, the slowest rank; refreshed every second. Ctrl-C ends it."""
    from stallscope import load_summary
    from stallscope.exceptions import StallscopeError

    def show() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                rows = load_summary(run, last_steps=steps, straggler_pct=straggler_pct)
            except StallscopeError as e:
                raise click.ClickException(str(e)) from None
        render(run, top_view(rows, steps), max_rows)
        for w in caught:
            click.echo(f"warning: {w.message}", err=True)

    if once:
        show()
        return
    try:
        while True:
            click.clear()
            show()
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
