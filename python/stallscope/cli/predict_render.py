"""How `stallscope predict` shows a prediction: what it rests on, then one table."""

from __future__ import annotations

from pathlib import Path

import click

from stallscope.predict import Prediction, Profile


def print_prediction(run: Path, prof: Profile, pred: Prediction) -> None:
    from stallscope.cli.render import print_frame
    from stallscope.predict._report import display_table

    m = prof.measured
    src = prof.source
    click.echo(
        f"{run}: {m.ranks} rank(s) on {m.nodes} node(s) ({m.device}, {m.backend}), step "
        f"{m.step_ns / 1e6:.1f} ms measured (mean of the middle half of the steps of "
        f"{src.get('steps_used', '?')} rank-steps, warm-up excluded; median "
        f"{(m.step_median_ns or m.step_ns) / 1e6:.1f} ms, interquartile range "
        f"{m.step_spread_ns / 1e6:.1f} ms)"
    )
    if pred.links:
        click.echo("link figures used:")
        for line in pred.links:
            click.echo(f"  {line}")
    for note in prof.notes:
        click.echo(f"note: {note}")
    for w in pred.warnings:
        click.echo(f"warning: {w}", err=True)
    table = display_table(prof, pred)
    labels = {
        "configuration": "nodes x ranks, link",
        "step_ms": "step ms",
        "spread_ms": "spread ms",
        "speedup": "speed-up",
    }
    for c in table.columns:
        if c.endswith("_ms") and c != "step_ms":
            labels[c] = f"{c.removesuffix('_ms').replace('_', ' ')} ms"
        elif c.endswith("_pct"):
            labels[c] = "%"
    digits = {c: (1 if c.endswith(("_ms", "_pct")) else 2) for c in table.columns}
    click.echo()
    print_frame(
        table,
        title="predicted step and stalls (speed-up: samples per second against the measured run)",
        digits=digits,
        labels=labels,
        max_rows=10_000,
    )
