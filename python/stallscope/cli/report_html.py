"""`stallscope report --html`: a loaded run (or a continuous trace's per-step summary) written
as the HTML report of stallscope.report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import polars as pl

SUMMARY_ONLY = (
    "per-step summary of a continuous trace (its event files are gone): the slowest step's "
    "timeline, the collective bandwidth and the stragglers need the events; take an on-demand "
    "capture (`stallscope capture RUN --steps 20`) or trace in mode 'full' for them"
)


def write_html_report(
    loaded: Any,
    out: Path,
    calibration: Path | None,
    hta: bool | None = None,
    frames: dict[str, Any] | None = None,
) -> Path:
    """Write `loaded` (cli._source.Loaded) as the HTML report, with `frames` of other tools by
    ReportData field ("prediction", "pareto", ...); ClickException when it cannot."""
    import stallscope.report as sr
    from stallscope.exceptions import StallscopeError

    facts = sr.RunFacts(
        path=str(loaded.path),
        source=loaded.source,
        events=loaded.events.height,
        world_size=loaded.world_size,
        coverage=loaded.coverage,
        steps_found=loaded.steps_found,
        notes=loaded.notes,
    )
    try:
        data = sr.report_data(loaded.events, facts, calibration=calibration, hta=hta)
        for name, frame in (frames or {}).items():
            setattr(data, name, frame)
        return sr.write_html(data, out)
    except StallscopeError as e:
        raise click.ClickException(str(e)) from None


def write_summary_html(run: Path, rows: pl.DataFrame, notes: list[str], out: Path) -> Path:
    """Write the HTML report of a run that has only a continuous trace's per-step summary
    (stallscope.load_summary's rows): the summary, stall bars and legend; the sections that
    need events say so."""
    import stallscope.report as sr
    from stallscope.analysis import STALL_COLUMNS
    from stallscope.exceptions import StallscopeError

    cols = ["rank", "step", "start_ns", "end_ns", "step_ns", *STALL_COLUMNS]
    # steps outside a continuous trace's device windows have no compute, comm or host figures
    measured = rows.filter(pl.col("device")) if "device" in rows.columns else rows
    if measured.height < rows.height:
        notes = [
            *notes,
            f"device events in {measured.height} of {rows.height} rank-steps (the trace's "
            "device windows): the stall figures are theirs",
        ]
    table = measured.select([c for c in cols if c in measured.columns])
    facts = sr.RunFacts(
        path=str(run),
        source="summary",
        events=int(rows["events"].sum() or 0) if "events" in rows.columns else 0,
        notes=[SUMMARY_ONLY, *notes],
    )
    try:
        return sr.write_html(sr.ReportData(run=facts, stall_table=table), out)
    except StallscopeError as e:
        raise click.ClickException(str(e)) from None
