"""compare: a prediction and a measured stall table side by side, column by column."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl

from stallscope.analysis import STALL_COLUMNS
from stallscope.predict._errors import PredictError


def measured_step(
    measured: pl.DataFrame | str | os.PathLike[str], *, native: bool | None = None
) -> dict[str, float]:
    """A measured run as one step (ns per column): its stall table over the steps the profile
    rule keeps (warm-up dropped; a native run's last step too), as the profile summarises it:
    the mean over the rank-steps of the middle half of the steps by step time (the columns sum
    to the step), plus step_median_ns and step_spread_ns. ``measured``: a stall table, an
    events frame or a run directory / traces."""
    from stallscope.analysis import stall_table
    from stallscope.predict._central import table_summary
    from stallscope.predict._extract import kept_windows

    if isinstance(measured, (str, os.PathLike)):
        path = Path(measured)
        import stallscope

        if path.is_dir() and any(path.glob("rank-*.parquet")):
            events, native = stallscope.load(path), True if native is None else native
        else:
            events, native = stallscope.import_kineto(path), False if native is None else native
        table = stall_table(events)
    elif "kind" in measured.columns:
        table = stall_table(measured)
    elif "step_ns" in measured.columns:
        table = measured
    else:
        raise PredictError(
            "compare's measured side must be a stall table (stallscope.stall_table), an events "
            f"frame or a run directory; got a frame with columns {measured.columns}"
        )
    if table.height == 0:
        raise PredictError("the measured run has no steps (no step markers): nothing to compare")
    windows = table.select("rank", "step", "start_ns", "end_ns")
    kept = kept_windows(windows, native=bool(native))
    if kept.height == 0:
        kept = windows
    return table_summary(table.join(kept.select("rank", "step"), on=["rank", "step"], how="semi"))


def compare(
    predicted: pl.DataFrame | dict[str, Any],
    measured: pl.DataFrame | str | os.PathLike[str] | dict[str, float],
    *,
    native: bool | None = None,
) -> pl.DataFrame:
    """One row per column (step, then the stall columns): predicted_ns, measured_ns, error_ns
    (predicted - measured), error_pct (of the measured column; null where it is 0) and
    error_of_step_pct (of the measured step time: how the stall split compares).

    ``predicted``: a row of `predict` (a one-row frame or a dict); ``measured``: a stall table,
    an events frame, a run directory, or `measured_step`'s dict."""
    if isinstance(predicted, pl.DataFrame):
        if predicted.height != 1:
            raise PredictError(
                f"compare takes one predicted configuration, got {predicted.height} rows: "
                "select one (e.g. frame[i])"
            )
        pred = predicted.row(0, named=True)
    else:
        pred = dict(predicted)
    meas = measured if isinstance(measured, dict) else measured_step(measured, native=native)
    cols = ["step_ns", *STALL_COLUMNS]
    missing = [c for c in cols if c not in pred]
    if missing:
        raise PredictError(f"the prediction lacks column(s) {missing}: pass a row of predict()")
    step = float(meas["step_ns"])
    rows = []
    for c in cols:
        p, m = float(pred[c]), float(meas.get(c, 0.0))
        rows.append(
            {
                "column": c,
                "predicted_ns": p,
                "measured_ns": m,
                "error_ns": p - m,
                "error_pct": 100.0 * (p - m) / m if m else None,
                "error_of_step_pct": 100.0 * (p - m) / step if step else None,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "column": pl.String,
            "predicted_ns": pl.Float64,
            "measured_ns": pl.Float64,
            "error_ns": pl.Float64,
            "error_pct": pl.Float64,
            "error_of_step_pct": pl.Float64,
        },
    )
