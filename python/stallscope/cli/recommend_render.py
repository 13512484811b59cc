"""What `stallscope recommend` prints and writes: the answer and why, the Pareto front, the best
configurations, what the figures rest on and what was left out; the JSON file."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import polars as pl

from stallscope.analysis import STALL_COLUMNS
from stallscope.recommend import Recommendation

_STALLS = tuple(c for c in STALL_COLUMNS if c != "compute_ns")
_LABELS = {
    "layout": "layout (planned)",
    "ranks": "GPUs",
    "hours": "hours",
    "cost": "cost $",
    "hourly": "$/hour",
    "step_ms": "step ms",
    "compute_pct": "compute %",
    "risk_pct": "risk %",
    "stall": "largest stall",
}
_DIGITS = {"hours": 2, "cost": 0, "hourly": 2, "step_ms": 1, "compute_pct": 0, "risk_pct": 1}


def _shown(frame: pl.DataFrame) -> pl.DataFrame:
    """The columns a person reads: sizes, time, money, the step and its largest stall."""
    stall = pl.concat_list(
        [
            pl.struct(
                name=pl.lit(c.removesuffix("_ns").replace("_", " ")),
                share=pl.col(c) / pl.col("step_ns"),
            )
            for c in _STALLS
        ]
    )
    largest = stall.list.eval(pl.element().sort_by(pl.element().struct.field("share")).last())
    return frame.with_columns(
        step_ms=pl.col("step_ns") / 1e6,
        compute_pct=100 * pl.col("compute_ns") / pl.col("step_ns"),
        risk_pct=100 * pl.col("risk"),
        stall=largest.list.first().map_elements(
            lambda s: f"{s['name']} {100 * s['share']:.0f} %", return_dtype=pl.String
        ),
    )


def _digits(frame: pl.DataFrame) -> dict[str, int]:
    """Decimals per column; cents where every cost shown is under $100."""
    small = frame.height > 0 and float(frame["cost"].max() or 0.0) < 100  # type: ignore[arg-type]
    return _DIGITS | {"cost": 2 if small else 0}


def _around_best(front: pl.DataFrame, rec: Recommendation, top: int) -> tuple[pl.DataFrame, str]:
    """At most ``top`` rows of the front, around the recommended configuration (or the first
    that meets the budget), and which ones they are ("rows 12-21"); all of it when it fits."""
    if front.height <= top:
        return front, ""
    key = (rec.best["config"], rec.best["market"])
    rows = list(zip(front["config"], front["market"], strict=True))
    at = rows.index(key) if key in rows else int(front["meets"].arg_max() or 0)
    start = max(0, min(at - top // 2, front.height - top))
    return front.slice(start, top), f"rows {start + 1}-{start + top}"


def print_recommendation(rec: Recommendation, run: Sequence[Path | str], top: int) -> None:
    from stallscope.cli.render import print_frame

    where = ", ".join(str(p) for p in run)
    # a planned model's configurations each run in a layout of their own
    layout = ["layout"] if rec.candidates["layout"].is_not_null().any() else []
    click.echo(f"For {where}: {rec.objective}.")
    click.echo("")
    click.echo(rec.why)
    click.echo("")
    spot = bool((rec.candidates["market"] == "spot").any())
    risk = ["risk_pct"] if spot and rec.candidates["risk"].is_not_null().any() else []
    front = _shown(rec.candidates.filter("pareto").sort("hours", "cost"))
    window, where = _around_best(front, rec, top)
    print_frame(
        window.select(
            "config", *layout, "market", "ranks", "hours", "cost", "step_ms", *risk, "stall"
        ),
        title="Pareto front: no other configuration is both faster and cheaper"
        + (f" ({where} of {front.height}, fastest first)" if where else ""),
        max_rows=top,
        digits=_digits(window),
        labels=_LABELS,
    )
    best = _shown(rec.candidates.head(top))
    print_frame(
        best.select(
            "config",
            *layout,
            "cloud",
            "region",
            "market",
            "ranks",
            "hours",
            "cost",
            "hourly",
            "step_ms",
            "compute_pct",
            *risk,
            "stall",
        ),
        title=f"The best {min(top, rec.candidates.height)} of {rec.candidates.height} "
        "configurations (those meeting the budget first)",
        max_rows=top,
        digits=_digits(best),
        labels=_LABELS,
    )
    click.echo("What the figures rest on:")
    for note in rec.notes:
        click.echo(f"  - {note}")
    if rec.excluded.height:
        click.echo("Left out:")
        groups = rec.excluded.group_by("reason", "counts", "cloud", maintain_order=True).agg(
            pl.col("instance").unique(maintain_order=True)
        )
        for reason, counts, cloud, names in groups.iter_rows():
            shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
            click.echo(f"  - {cloud} {shown} x {counts}: {reason}")


def as_json(rec: Recommendation, run: Sequence[Path | str]) -> dict[str, Any]:
    """The recommendation as one JSON document."""
    return {
        "run": [str(p) for p in run],
        "objective": rec.objective,
        "best": rec.best,
        "why": rec.why,
        "pareto": rec.pareto.to_dicts(),
        "candidates": rec.candidates.to_dicts(),
        "excluded": rec.excluded.to_dicts(),
        "notes": rec.notes,
    }


def write_json(rec: Recommendation, out: Path, run: Sequence[Path | str]) -> None:
    import orjson

    data = orjson.dumps(as_json(rec, run), option=orjson.OPT_INDENT_2) + b"\n"
    if str(out) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    from stallscope.cli._paths import output_file, write_error

    try:
        output_file(out).write_bytes(data)
    except OSError as e:
        raise write_error(out, e) from None
    click.echo(f"wrote {out}", err=True)
