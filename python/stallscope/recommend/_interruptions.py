"""Published spot interruption rates per instance type (the shipped file or a user's)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import polars as pl

from stallscope.recommend._cell_values import (
    Problems,
    check_columns,
    date_column,
    number_column,
    text_column,
)
from stallscope.recommend._table_file import read_text_table

INTERRUPTION_COLUMNS: tuple[str, ...] = (
    "cloud",
    "region",
    "instance",
    "band",
    "band_low_pct",
    "band_high_pct",
    "rate_per_hour",
    "source",
    "date",
)

_SCHEMA: dict[str, type[pl.DataType]] = {
    "cloud": pl.String,
    "region": pl.String,
    "instance": pl.String,
    "band": pl.String,
    "band_low_pct": pl.Float64,
    "band_high_pct": pl.Float64,
    "rate_per_hour": pl.Float64,
    "source": pl.String,
    "date": pl.Date,
}


def load_spot_interruptions(path: str | Path | None = None) -> pl.DataFrame:
    """Spot interruption rates with INTERRUPTION_COLUMNS: the published band of interruptions
    per month (band, band_low_pct, band_high_pct; the top band has no high end) and the
    interruptions per instance-hour derived from it (data/README.md says how). `path` None:
    the shipped file. Problems raise CatalogError naming the file, row and column."""
    source = (
        Path(path)
        if path is not None
        else Path(str(resources.files("stallscope.recommend") / "data" / "spot_interruptions.csv"))
    )
    table = read_text_table(source, "spot interruption table")
    check_columns(table, INTERRUPTION_COLUMNS, (), "spot interruption table")
    p = Problems(table, "spot interruption table")
    cols: dict[str, list[object]] = {
        "cloud": [c.lower() for c in text_column(p, "cloud")],
        "region": list(text_column(p, "region")),
        "instance": list(text_column(p, "instance")),
        "band": list(text_column(p, "band")),
        "band_low_pct": list(number_column(p, "band_low_pct", positive=False, high=100)),
        "band_high_pct": list(
            number_column(
                p, "band_high_pct", nullable=True, high=100, empty_means="for the top band"
            )
        ),
        "rate_per_hour": list(number_column(p, "rate_per_hour", positive=False, high=1)),
        "source": list(text_column(p, "source")),
        "date": list(date_column(p, "date")),
    }
    for i, (lo, hi) in enumerate(zip(cols["band_low_pct"], cols["band_high_pct"], strict=True)):
        if isinstance(lo, float) and isinstance(hi, float) and hi <= lo:
            p.add(i, "band_high_pct", f"{hi:g} is not above band_low_pct {lo:g}")
    p.check()
    return pl.DataFrame(cols, schema=_SCHEMA)
