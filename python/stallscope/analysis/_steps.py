"""Steps: the windows between consecutive step markers, per rank, and which step each event
falls in. A step marker is a ``step`` event (stallscope.step(), or an imported ProfilerStep#N);
window k runs from marker k to the next marker of the same rank."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from stallscope._schema import KIND, KIND_ID
from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil

Array = np.ndarray[Any, Any]


@fair_gil
def step_windows(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank and step: rank, step, start_ns, end_ns, step_ns, sorted by rank and
    start.

    Markers are instants (stallscope.step()) or ranges (imported ProfilerStep#N, whose end is
    then the window's end when no later marker comes first). Markers with a null rank, start or
    end are ignored; a null correlation gives a null step."""
    return window_arrays(events).frame()


def window_arrays(
    events: pl.DataFrame | pl.LazyFrame, rows: tuple[Array, Array, Array, Array] | None = None
) -> Windows:
    """step_windows as arrays (`Windows`: the stall table's form). `rows`: the events' kind
    codes, rank, start_ns and end_ns as NumPy, with no nulls, when the caller has them (the
    stall table's small frames): only the markers' correlation is then read from `events`."""
    cols = ("rank", "correlation", "start_ns", "end_ns")
    if rows is not None and isinstance(events, pl.DataFrame):
        kind, rank, start, end = rows
        at = np.flatnonzero(kind == KIND_ID["step"])
        r, s, e = rank[at], start[at], end[at]
        corr = events["correlation"]
        if not corr.null_count():
            return windows(r.astype(np.int32, copy=False), corr.to_numpy()[at], s, e)
        corr = corr.gather(at)
    else:
        if isinstance(events, pl.DataFrame) and events.schema.get("kind") == KIND:
            # The markers by their kind code, eagerly: a lazy query's planning costs more than
            # the few rows it selects.
            kind = _arrow.enum_codes(events["kind"])
            m = events.select(cols)[_arrow.series(np.flatnonzero(kind == KIND_ID["step"]))]
            if any(m[c].null_count() for c in ("rank", "start_ns", "end_ns")):
                m = m.drop_nulls(("rank", "start_ns", "end_ns"))
        else:
            m = (
                events.lazy()
                .filter(pl.col("kind") == "step")
                .select(cols)
                .drop_nulls(("rank", "start_ns", "end_ns"))
                .collect()
            )
        corr = m["correlation"]
        r, s, e = m["rank"].to_numpy(), m["start_ns"].to_numpy(), m["end_ns"].to_numpy()
    null = corr.is_null().to_numpy() if corr.null_count() else None
    return windows(r.astype(np.int32, copy=False), _arrow.int_values(corr, np.int64, 0), s, e, null)


@dataclass
class Windows:
    """Step windows as arrays, sorted by rank then start (`windows`); ``step_null`` marks the
    steps whose marker had a null correlation (None when none did)."""

    rank: Array
    step: Array
    start: Array
    end: Array
    step_null: Array | None

    def frame(self) -> pl.DataFrame:
        """step_windows' frame: rank (Int32), step, start_ns, end_ns, step_ns."""
        step = _arrow.series(self.step, "step", pl.Int64)
        if self.step_null is not None and self.step_null.any():
            step = step.scatter(np.flatnonzero(self.step_null), None)
        return pl.DataFrame(
            [
                _arrow.series(self.rank, "rank", pl.Int32),
                step,
                _arrow.series(self.start, "start_ns", pl.Int64),
                _arrow.series(self.end, "end_ns", pl.Int64),
                _arrow.series(self.end - self.start, "step_ns", pl.Int64),
            ]
        )


def windows(
    rank: Array, step: Array, start: Array, end: Array, step_null: Array | None = None
) -> Windows:
    """The windows of step markers (rank, step number, start and end ns of each marker, in any
    order): window k runs from marker k to the next marker of the same rank; a marker that is
    a range (end > start) ends its window at its own end when that comes first, and the last
    marker of a rank opens a window only when it is a range. Markers with equal starts keep
    their order. NumPy: one sort, no query."""
    order = np.lexsort((start, rank))
    r, s, e = rank[order], start[order], end[order]
    n = r.size
    nxt = np.zeros(n, np.int64)  # the next marker's start, same rank
    has_next = np.zeros(n, bool)
    if n > 1:
        has_next[:-1] = r[1:] == r[:-1]
        nxt[:-1] = s[1:]
    ranged = e > s
    w_end = np.where(has_next, np.where(ranged, np.minimum(nxt, e), nxt), e)
    keep = has_next | ranged
    at = order[keep]
    return Windows(
        rank=r[keep],
        step=step[at],
        start=s[keep],
        end=w_end[keep],
        step_null=None if step_null is None else step_null[at],
    )


@fair_gil
def assign_steps(
    events: pl.DataFrame | pl.LazyFrame, windows: pl.DataFrame | None = None
) -> pl.LazyFrame:
    """`events` with a ``step`` column: the step whose window holds the event's start (null
    outside every window)."""
    w = step_windows(events) if windows is None else windows
    lf = events.lazy().with_row_index("_row").sort("start_ns")
    joined = lf.join_asof(
        w.lazy()
        .select("rank", pl.col("start_ns").alias("_ws"), pl.col("end_ns").alias("_we"), "step")
        .sort("_ws"),
        left_on="start_ns",
        right_on="_ws",
        by="rank",
        strategy="backward",
        check_sortedness=False,  # sorted globally by start above, hence within each rank
    )
    return (
        joined.with_columns(step=pl.when(pl.col("start_ns") < pl.col("_we")).then(pl.col("step")))
        .sort("_row")
        .drop("_row", "_ws", "_we")
    )
