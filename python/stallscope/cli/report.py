"""`stallscope report RUN`: the stall tables of a native run or of Kineto traces."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import polars as pl

from stallscope.cli.render import MS, label


def _ms(df: pl.DataFrame, cols: list[str], digits: int = 3) -> pl.DataFrame:
    return df.with_columns(
        [(pl.col(c) / MS).round(digits).alias(c.removesuffix("_ns") + "_ms") for c in cols]
    ).drop(cols)


def _nonzero(table: pl.DataFrame, cols: tuple[str, ...]) -> list[str]:
    """The category columns that are not zero everywhere (to keep terminal tables narrow)."""
    return [c for c in cols if table.height and int(table[c].abs().max()) > 0]  # type: ignore[arg-type]


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def legend_lines(categories: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """What each stall category means, one entry each (all of them, or `categories`), wrapped
    to the terminal's width under the category's name."""
    import shutil
    import textwrap

    from stallscope.analysis import STALL_MEANINGS

    cats = list(STALL_MEANINGS) if categories is None else list(categories)
    width = max(len(label(c)) for c in cats)
    columns = max(shutil.get_terminal_size((100, 24)).columns, 60)
    indent = " " * (width + 4)
    return [
        textwrap.fill(
            STALL_MEANINGS[c],
            width=columns,
            initial_indent=f"  {label(c):>{width}}  ",
            subsequent_indent=indent,
        )
        for c in cats
    ]


def print_step_table(table: pl.DataFrame, max_rows: int = 40) -> None:
    """Print the stall table (one row per rank and step) in ms, only the categories that are
    not zero everywhere."""
    from stallscope.analysis import STALL_COLUMNS
    from stallscope.cli.render import print_frame

    cats = _nonzero(table, STALL_COLUMNS)
    per = _ms(table.select("rank", "step", "step_ns", *cats), ["step_ns", *cats], digits=2)
    # The title gives the unit: bare category names (and "total" for the step time) keep the
    # table within 80 columns.
    labels = {c: "total" if c == "step_ms" else label(c.removesuffix("_ms")) for c in per.columns}
    print_frame(
        per, title="stalls per step and rank (ms)", max_rows=max_rows, digits=2, labels=labels
    )


def shares_line(whole: pl.DataFrame) -> str:
    """One line of the run's shares (stall_run_summary): compute / comm (split) / data / host,
    memcpy when there is some."""
    share = {str(c): float(v) for c, v in whole.select("category", "share").iter_rows()}

    def pct(*cats: str) -> str:
        return f"{100 * sum(share.get(c, 0.0) for c in cats):.1f}%"

    comm = ("sync_wait", "network", "interconnect")
    parts = [f"compute {pct('compute')}"]
    if share.get("memcpy", 0.0) > 0:
        parts.append(f"memcpy {pct('memcpy')}")
    split = ", ".join(f"{c.replace('_', ' ')} {pct(c)}" for c in comm if share.get(c, 0.0) > 0)
    parts.append(f"comm {pct(*comm)}" + (f" ({split})" if split else ""))
    parts.append(f"data {pct('data_fetch', 'data_prep', 'data')}")
    parts.append(f"host {pct('host')}")
    return " | ".join(parts)


@click.command(short_help="Stall tables of a run or of profiler traces; --html report.")
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the tables as JSON (ns) for scripts.")
@click.option(
    "--max-rows",
    type=click.IntRange(1, 1_000_000),
    default=40,
    show_default=True,
    help="Rows shown of the per step and rank table.",
)
@click.option(
    "--hta",
    is_flag=True,
    help="Also HolisticTraceAnalysis' views of the GPU timeline: temporal breakdown, comm/comp "
    "overlap, idle time by cause, kernel time by type (HTA 0.5.0's numbers).",
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the report as one offline HTML file (plots need matplotlib: the report "
    "extra); missing folders are created.",
)
@click.option(
    "--calibration",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A calibration file (stallscope bench comm --calibrate FILE): the HTML report draws "
    "its fits over the run's collective bandwidth.",
)
def report(
    run: Path,
    as_json: bool,
    max_rows: int,
    hta: bool,
    html_out: Path | None,
    calibration: Path | None,
) -> None:
    """Where each step's time goes: stall tables per step and rank, per step across ranks,
    and for the whole run. RUN is a run directory or a folder (or file) of PyTorch profiler
    traces."""
    from stallscope.analysis import stall_run_summary, stall_summary, stall_table
    from stallscope.cli._source import describe, echo_warnings, load_run, load_summary_rows
    from stallscope.cli.report_hta import hta_json, hta_views, print_hta
    from stallscope.cli.report_html import write_html_report

    if calibration is not None and html_out is None:
        raise click.UsageError(
            "--calibration is drawn in the HTML report: add --html FILE (or leave it out)"
        )
    if html_out is not None:
        from stallscope.cli._paths import output_file

        output_file(html_out)
    if describe(run) == "summary":  # a continuous trace whose full events are gone
        _report_summary(run, as_json, max_rows, html_out)
        return
    loaded = load_run(run)
    events, source, notes = loaded.events, loaded.source, loaded.notes
    table = stall_table(events)
    summary, summary_notes = load_summary_rows(run) if source == "native" else (None, [])
    notes += summary_notes
    if html_out is not None:
        if summary is not None and summary["step"].drop_nulls().len():
            numbers = summary["step"].drop_nulls().to_list()
            notes.append(
                f"a continuous trace: this page covers the events kept (the last window and "
                f"the captures); its per-step summary holds {_count(summary.height, 'rank-step')}"
                f", steps {min(numbers)}..{max(numbers)} (`stallscope report {run}` prints them)"
            )
        written = write_html_report(loaded, html_out, calibration, hta or None)
    across = stall_summary(table)
    whole = stall_run_summary(table)
    views = hta_views(events) if hta else None
    if as_json:
        import orjson

        doc = {
            "path": str(run),
            "source": source,
            "events": events.height,
            "ranks": loaded.ranks,
            "world_size": loaded.world_size,
            "steps_found": loaded.steps_found,
            "warnings": notes,
            "steps": table.to_dicts(),
            "across_ranks": across.to_dicts(),
            "run": whole.with_columns(pl.col("category").cast(pl.String)).to_dicts(),
        }
        if views is not None:
            doc["hta"] = hta_json(views)
        if summary is not None:
            doc["summary"] = _summary_json(summary)
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        if html_out is not None:
            click.echo(f"wrote {written}", err=True)
        return

    echo_warnings(notes)
    ranks = events["rank"].n_unique() if events.height else 0
    click.echo(
        f"{run} ({source}): {_count(events.height, 'event')}, {_count(ranks, 'rank')}, "
        f"{_count(table.height, 'rank-step')}"
    )
    if loaded.coverage:
        click.echo(f"ranks: {loaded.coverage}")
    for line in loaded.steps_found:
        click.echo(f"steps: {line}")
    if table.height == 0:
        click.echo(
            "no steps: the run has no step markers (trace it with `stallscope profile`, which "
            "finds them; or call stallscope.step() each iteration; or profile with "
            "torch.profiler's schedule so traces carry ProfilerStep#N)"
        )
    else:
        _print_stalls(table, across, whole, max_rows)
        if int(table["compute_ns"].sum() or 0) == 0:
            click.echo(
                "\nno compute: the run recorded no GPU kernels and no compute regions, so the "
                "device's work shows as host. Trace it with `stallscope profile` (it records "
                "forward, backward and optimizer steps), or wrap them in "
                'stallscope.region("forward", category="compute").'
            )
    if views is not None:
        click.echo()
        print_hta(views, max_rows)
    if summary is not None and summary["step"].drop_nulls().len():
        steps = summary["step"].drop_nulls().to_list()
        click.echo(
            f"continuous summary: {_count(summary.height, 'rank-step')}, steps "
            f"{min(steps)}..{max(steps)} (the full events above cover the last window and "
            f"captures only): {shares_line(stall_run_summary(_measured(summary)))}"
            + _device_note(summary)
        )
    if html_out is not None:
        click.echo(f"\nHTML report: {written}")


def _measured(rows: pl.DataFrame) -> pl.DataFrame:
    """The summary rows with device events: the others have no compute, comm or host figures
    (steps outside a continuous trace's device windows)."""
    return rows.filter(pl.col("device"))


def _device_note(rows: pl.DataFrame) -> str:
    n = int(rows["device"].sum())
    if n == rows.height:
        return ""
    return f" (shares of the {n} of {rows.height} rank-steps with device events)"


def _summary_json(summary: pl.DataFrame) -> dict[str, object]:
    from stallscope.analysis import stall_run_summary, stall_summary

    return {
        "steps": summary.to_dicts(),
        "across_ranks": stall_summary(_measured(summary)).to_dicts(),
        "run": stall_run_summary(_measured(summary))
        .with_columns(pl.col("category").cast(pl.String))
        .to_dicts(),
    }


def _report_summary(run: Path, as_json: bool, max_rows: int, html_out: Path | None) -> None:
    """A run directory whose event files are gone: the tables from its per-step summary (and
    the HTML report's sections that need only those)."""
    from stallscope.analysis import stall_run_summary, stall_summary
    from stallscope.cli._source import echo_warnings, load_summary_rows
    from stallscope.cli.report_html import write_summary_html

    rows, notes = load_summary_rows(run)
    assert rows is not None
    written = write_summary_html(run, rows, notes, html_out) if html_out is not None else None
    if as_json:
        import orjson

        doc: dict[str, object] = {"path": str(run), "source": "summary", "warnings": notes}
        doc |= _summary_json(rows)
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        if written is not None:
            click.echo(f"wrote {written}", err=True)
        return
    echo_warnings(notes)
    ranks = rows["rank"].n_unique() if rows.height else 0
    click.echo(
        f"{run} (per-step summary of a continuous trace; no event files): "
        f"{_count(ranks, 'rank')}, {_count(rows.height, 'rank-step')}" + _device_note(rows)
    )
    measured = _measured(rows)
    if measured.height:
        _print_stalls(measured, stall_summary(measured), stall_run_summary(measured), max_rows)
    if written is not None:
        click.echo(f"\nHTML report: {written}")


def _print_stalls(
    table: pl.DataFrame, across: pl.DataFrame, whole: pl.DataFrame, max_rows: int
) -> None:
    from stallscope.analysis import STALL_COLUMNS
    from stallscope.cli.render import print_frame

    print_step_table(table, max_rows)
    cats = _nonzero(table, STALL_COLUMNS)
    maxes = [c.removesuffix("_ns") + "_max_ns" for c in cats]
    a = across.select("step", "ranks", "slowest_rank", "step_max_ns", "step_median_ns", *maxes)
    # Bare category names and worded headers (the title gives the unit and the statistic), so
    # that the table usually fits in 80 columns.
    labels = {"slowest_rank": "slowest rank", "step_max_ms": "step max"}
    labels |= {"step_median_ms": "step median"}
    labels |= {m.removesuffix("_ns") + "_ms": label(m.removesuffix("_max_ns")) for m in maxes}
    print_frame(
        _ms(a, ["step_max_ns", "step_median_ns", *maxes], digits=2),
        title="per step across ranks (ms; max over ranks unless median)",
        max_rows=max_rows,
        digits=2,
        labels=labels,
    )
    w = whole.select(
        pl.col("category").cast(pl.String),
        (pl.col("total_ns") / MS).round(3).alias("total_ms"),
        (pl.col("share") * 100).round(1).alias("share_%"),
        (pl.col("per_step_ns") / MS).round(3).alias("per_step_ms"),
    )
    print_frame(
        w,
        title="whole run",
        digits={"total_ms": 3, "share_%": 1, "per_step_ms": 3},
        labels={"total_ms": "total ms", "share_%": "share %", "per_step_ms": "per step ms"},
    )
    click.echo(f"run: {shares_line(whole)}")
    shown = [c.removesuffix("_ns") for c in cats]
    click.echo("\nwhat the categories mean (docs/stall-categories.md):")
    for line in legend_lines(shown if "host_ns" in cats else [*shown, "host"]):
        click.echo(line)
