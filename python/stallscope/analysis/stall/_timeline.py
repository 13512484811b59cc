"""The stall table's attribution as a timeline: every instant of every step in exactly one
category (the rules of ``_table``), as intervals per rank."""

from __future__ import annotations

import polars as pl

from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope.analysis.stall._intervals import exclusive
from stallscope.analysis.stall._sources import ATTRIBUTED
from stallscope.analysis.stall._table import STALL_CATEGORIES, prepare


def _locate(segments: pl.LazyFrame, windows: pl.LazyFrame) -> pl.LazyFrame:
    """`segments` (sorted by start, none crossing a window boundary) with the index ``_w`` of the
    window holding each; segments outside every window are dropped."""
    return (
        segments.join_asof(
            windows.filter(pl.col("end") > pl.col("start")).select("_w", _ws="start", _we="end"),
            left_on="start",
            right_on="_ws",
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("start") < pl.col("_we"))
        .drop("_ws", "_we")
    )


@fair_gil
def stall_intervals(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The attributed timeline: rank, step, category (one of `STALL_CATEGORIES`), start_ns,
    end_ns, sorted by rank and start. The intervals of a rank are disjoint, cover each of its
    steps exactly and never cross a step boundary; their lengths summed per rank, step and
    category give stall_table."""
    p = prepare(events)
    schema = {
        "rank": pl.Int32(),
        "step": pl.Int64(),
        "category": pl.Enum(list(STALL_CATEGORIES)),
        "start_ns": pl.Int64(),
        "end_ns": pl.Int64(),
    }
    if p.windows.height == 0:
        return pl.DataFrame(schema=schema)
    w = p.windows.frame()
    windows = w.lazy().select("start", "end").with_row_index("_w")
    cuts = pl.concat([windows.select(t="start"), windows.select(t="end")])
    host = len(ATTRIBUTED)
    everything = pl.concat(
        [
            p.compute.intervals().lazy().with_columns(label=pl.lit(0, pl.Int32)),
            _arrow.frame(dict(zip(("label", "start", "end"), p.rest, strict=True))).lazy(),
            windows.select("start", "end", label=pl.lit(host, pl.Int32)),
        ],
        how="diagonal",
    )
    segs = _locate(exclusive(everything, host + 1, cuts), windows)
    # Neighbouring segments of one category in one step become one interval.
    new = (
        (pl.col("label") != pl.col("label").shift(1))
        | (pl.col("start") != pl.col("end").shift(1))
        | (pl.col("_w") != pl.col("_w").shift(1))
    ).fill_null(True)
    segs = (
        segs.with_columns(_g=new.cum_sum())
        .group_by("_g")
        .agg(pl.col("_w", "label").first(), pl.col("start").min(), pl.col("end").max())
    )
    names = pl.Series(list(STALL_CATEGORIES), dtype=schema["category"])
    info = w.lazy().with_row_index("_w").select("_w", "rank", "step", "offset")
    return (
        segs.join(info, on="_w", how="left")
        .select(
            "rank",
            "step",
            pl.lit(names).gather(pl.col("label")).alias("category"),
            start_ns=pl.col("start") - pl.col("offset"),
            end_ns=pl.col("end") - pl.col("offset"),
        )
        .sort("rank", "start_ns")
        .collect()
    )
