"""The shipped spot interruption table and malformed ones."""

from __future__ import annotations

import datetime
import math
from pathlib import Path

import polars as pl
import pytest

from stallscope.exceptions import CatalogError
from stallscope.recommend import (
    INTERRUPTION_COLUMNS,
    load_catalog,
    load_spot_interruptions,
    shipped_catalog_path,
)

HOURS_PER_MONTH = 730


def test_shipped_interruptions_validate_and_follow_their_bands() -> None:
    df = load_spot_interruptions()
    assert df.columns == list(INTERRUPTION_COLUMNS)
    assert df.height > 0
    as_of = pl.read_csv(shipped_catalog_path(), try_parse_dates=True)["date"].max()
    assert isinstance(as_of, datetime.date)
    catalog = load_catalog(today=as_of)  # as of its newest date: no age warning
    aws = set(catalog.filter(catalog["cloud"] == "aws")["instance"])
    for r in df.iter_rows(named=True):
        assert r["source"].startswith("https://") and r["date"] is not None
        assert r["instance"] in aws, r["instance"]  # rates for instances the catalog has
        lo, hi = r["band_low_pct"], r["band_high_pct"]
        assert r["band"] == (
            f"<{hi:g}%" if lo == 0 else f">{lo:g}%" if hi is None else f"{lo:g}-{hi:g}%"
        )
        p = (lo + hi) / 200 if hi is not None else lo / 100  # the top band: its low end
        assert r["rate_per_hour"] == pytest.approx(-math.log(1 - p) / HOURS_PER_MONTH, rel=1e-2)


def test_bad_interruption_table(tmp_path: Path) -> None:
    path = tmp_path / "spot.csv"
    path.write_text(
        ",".join(INTERRUPTION_COLUMNS) + "\n"
        "aws,us-east-1,p5.48xlarge,5-10%,10,5,0.0001,https://example.com,2026-08-10\n"
    )
    with pytest.raises(CatalogError, match=r"row 1, column band_high_pct: 5 is not above"):
        load_spot_interruptions(path)
    path.write_text("cloud,region\naws,us-east-1\n")
    with pytest.raises(CatalogError, match="missing column"):
        load_spot_interruptions(path)
