"""Reading the per-step summary of a continuous trace, while the job runs or after: every rank's
rows, clocks aligned, with the cross-rank parts done here: sync wait and stragglers.

What a rank knows alone (its rows, io/_summary_files.py): its step time, and its compute,
memcpy, data and host time exactly; its exposed communication time (network_ns +
interconnect_ns of its row), but not how much of it was spent waiting for the other ranks.
The reader matches every rank's arrivals at the collectives (group, operation, sequence
number) to find each instance's last arrival, and moves each rank's exposed communication
inside its waits to sync wait (analysis/stall/_exposed.py: the same result as the stall table
of the full events). A straggler is a rank whose step took more than ``straggler_pct`` % over
the median of that step across ranks.

While the job runs, the latest rows of some ranks may not be written yet: a row whose
collectives have not been seen on every member of their group has ``matched`` false (its sync
wait may still grow once the others' rows arrive).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import polars as pl

from stallscope.analysis.stall._exposed import ARRIVALS_SCHEMA, EXPOSED_SCHEMA, split_sync_wait
from stallscope.exceptions import RunDirError, StallscopeWarning
from stallscope.io._load import Clock, clock_offsets
from stallscope.io._run_json import read_run_json
from stallscope.io._summary_files import (
    DEVICE_COLUMNS,
    STALL_COLUMNS,
    read_rows,
    summary_dir,
)

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "step": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "step_ns": pl.Int64(),
    **{c: pl.Int64() for c in STALL_COLUMNS},
    "events": pl.Int64(),
    "matched": pl.Boolean(),
    "straggler": pl.Boolean(),
    "device": pl.Boolean(),
}


def _clock_frame(clocks: dict[int, Clock]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "rank": list(clocks),
            "_t_a": [c.t_a for c in clocks.values()],
            "_o_a": [c.o_a for c in clocks.values()],
            "_slope": [c.slope for c in clocks.values()],
        },
        schema={"rank": pl.Int32, "_t_a": pl.Int64, "_o_a": pl.Int64, "_slope": pl.Float64},
    )


def _align(df: pl.DataFrame, cols: tuple[str, ...], clocks: pl.DataFrame | None) -> pl.DataFrame:
    """`cols` (ns) moved onto rank 0's clock, each instant by its own shift (load() shifts an
    event's end by its start's: the two differ by slope x duration, nanoseconds)."""
    if clocks is None or df.height == 0:
        return df
    j = df.join(clocks, on="rank", how="left", maintain_order="left")
    shift = [
        (pl.col("_o_a") + pl.col("_slope") * (pl.col(c) - pl.col("_t_a")))
        .round()
        .cast(pl.Int64)
        .fill_null(0)
        .alias(f"_d{c}")
        for c in cols
    ]
    return (
        j.with_columns(shift)
        .with_columns([pl.col(c) + pl.col(f"_d{c}") for c in cols])
        .select(df.columns)
    )


def load_summary(
    run_dir: str | os.PathLike[str],
    *,
    straggler_pct: float = 10.0,
    align_clocks: bool = True,
    last_steps: int | None = None,
) -> pl.DataFrame:
    """The per-step summary of a continuous trace: one row per rank and step (rank, step,
    start_ns, end_ns, step_ns, the stall table's columns, events, matched, straggler, device),
    sorted by rank and start; readable while the job runs (a row is there once its step is
    complete and the summary lag has passed). ``device`` false: a step outside the trace's
    device windows, whose compute, memcpy, sync wait, network, interconnect and host are null
    (only its device events could say). `last_steps`: only about the latest that many
    rows of each rank (cheap: the latest files only). Times are moved onto rank 0's clock when
    the run measured offsets (`align_clocks`).

    RunDirError when the directory holds no summary (a trace in mode "full" writes none)."""
    d = Path(run_dir)
    if not d.is_dir():
        raise RunDirError(
            f"{d}: no such run directory; pass the out_dir given to stallscope.trace()"
        )
    if not summary_dir(d).is_dir():
        raise RunDirError(
            f"{d}: no per-step summary ({summary_dir(d).name}/ is missing): only a continuous "
            "trace writes one; trace with stallscope.trace(..., mode='continuous') or "
            "STALLSCOPE_MODE=continuous"
        )
    got = read_rows(d, last_rows=last_steps)
    for name, n in got.bad_lines.items():
        warnings.warn(
            f"{d}: summary file {name}: {n} line(s) that are not a row were skipped (a write "
            "cut short, e.g. by a full disk)",
            StallscopeWarning,
            stacklevel=2,
        )
    doc = read_run_json(d)
    procs = doc.get("processes", {}) if doc else {}
    for stem, p in sorted(procs.items()):
        err = ((p.get("continuous") or {}).get("errors") or {}).get("summary")
        if err:
            warnings.warn(
                f"{d}: {stem}: its summary stopped early: {err}", StallscopeWarning, stacklevel=2
            )
    clocks = clock_offsets(procs) if align_clocks else {}
    cf = _clock_frame(clocks) if clocks else None
    rows = _align(got.rows, ("start_ns", "end_ns"), cf)
    steps = rows.filter(~pl.col("arrivals_only"))
    # a step outside the device windows: its device columns stay null (split with zeros)
    table = steps.select(
        "rank", "step", "start_ns", "end_ns", "step_ns", *STALL_COLUMNS
    ).with_columns(pl.col(c).fill_null(0) for c in DEVICE_COLUMNS)
    exposed = _align(
        steps.select(
            "rank",
            step_start_ns="start_ns",
            start_ns="exp_start",
            end_ns="exp_end",
            network="exp_net",
        )
        .explode("start_ns", "end_ns", "network")
        .drop_nulls("start_ns"),
        ("start_ns", "end_ns"),
        cf,
    ).cast(EXPOSED_SCHEMA)  # type: ignore[arg-type]
    arrivals = _align(
        rows.select(
            "rank",
            "start_ns",
            key="coll_key",
            seq="coll_seq",
            a="coll_start",
            b="coll_end",
            group_size="coll_size",
        )
        .explode("key", "seq", "a", "b", "group_size")
        .drop_nulls("key")
        .rename({"start_ns": "row_start_ns"})
        .rename({"a": "start_ns", "b": "end_ns"}),
        ("start_ns", "end_ns"),
        cf,
    ).unique(("rank", "key", "seq", "start_ns"), keep="first", maintain_order=True)
    out = split_sync_wait(table, exposed, arrivals.select(list(ARRIVALS_SCHEMA)))
    members = pl.col("rank").n_unique().over("key", "seq")
    short = arrivals.with_columns(
        _short=pl.col("group_size").is_not_null() & (members < pl.col("group_size"))
    )
    unmatched = short.group_by("rank", "row_start_ns").agg(pl.col("_short").any())
    # rows keyed by their (unaligned-equal) start: the arrival's row start went through the
    # same alignment as the row's
    unmatched = _align(unmatched.rename({"row_start_ns": "start_ns"}), ("start_ns",), cf)
    med = pl.col("step_ns").median().over("step")
    return (
        out.with_columns(steps["events"], steps["device"])
        .with_columns(
            pl.when(pl.col("device")).then(pl.col(c)).otherwise(None).alias(c)
            for c in DEVICE_COLUMNS
        )
        .join(unmatched, on=["rank", "start_ns"], how="left", maintain_order="left")
        .with_columns(
            matched=~pl.col("_short").fill_null(False),
            straggler=(pl.col("step_ns") > med * (1 + straggler_pct / 100))
            & (pl.col("rank").count().over("step") > 1),
        )
        .select(list(SUMMARY_SCHEMA))
        .cast(SUMMARY_SCHEMA)  # type: ignore[arg-type]
        .sort("rank", "start_ns")
    )
