"""The cloud instance catalog: the shipped one or a user's, checked cell by cell, with optional
price overrides, and selections of it by GPU, cloud and region."""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import polars as pl

from stallscope.exceptions import CatalogError, StallscopeWarning
from stallscope.recommend._cell_values import (
    Problems,
    check_columns,
    date_column,
    number_column,
    text_column,
)
from stallscope.recommend._gpu_lookup import family_members, gpu_device
from stallscope.recommend._table_file import TextTable, read_text_table

CATALOG_COLUMNS: tuple[str, ...] = (
    "cloud",
    "region",
    "instance",
    "gpu",
    "gpus",
    "gpu_memory_gb",
    "vcpus",
    "memory_gb",
    "intra_node_GBps",
    "network_gbps",
    "price_per_hour",
    "spot_price_per_hour",
    "source",
    "date",
)

CATALOG_SCHEMA: dict[str, type[pl.DataType]] = {
    "cloud": pl.String,
    "region": pl.String,
    "instance": pl.String,
    "gpu": pl.String,
    "gpus": pl.Int64,
    "gpu_memory_gb": pl.Float64,
    "vcpus": pl.Int64,
    "memory_gb": pl.Float64,
    "intra_node_GBps": pl.Float64,
    "network_gbps": pl.Float64,
    "price_per_hour": pl.Float64,
    "spot_price_per_hour": pl.Float64,
    "source": pl.String,
    "date": pl.Date,
}

PRICE_COLUMNS = ("cloud", "region", "instance", "price_per_hour", "date")
PRICE_OPTIONAL = ("spot_price_per_hour", "source")

MAX_GPUS = 16  # the most GPUs one instance has (a2-megagpu-16g, p2.16xlarge)
MAX_AGE_DAYS = 180  # a catalog whose newest price is older than this is flagged

_KEY = ("cloud", "region", "instance")
_SPOT_EMPTY = "where the instance has no spot price"


def shipped_catalog_path() -> Path:
    """The catalog shipped with stallscope (package data)."""
    return Path(str(resources.files("stallscope.recommend") / "data" / "catalog.csv"))


def load_catalog(
    path: str | Path | None = None,
    prices: str | Path | None = None,
    *,
    today: datetime.date | None = None,
) -> pl.DataFrame:
    """The instance catalog as a frame with CATALOG_COLUMNS: the shipped one (`path` None) or
    a CSV, Parquet or JSON file with the same columns. `prices`, a file with the columns
    cloud, region, instance, price_per_hour, date (and optionally spot_price_per_hour, source),
    replaces the prices of those rows; their date becomes the price file's and their source
    starts with it.

    Every cell is checked; a problem raises CatalogError naming the file, the row and the
    column. GPU names resolve, with the row's memory, to the device table's names
    (`stallscope.predict.device_names()`: "A100" with 80 GB is "A100-SXM4-80GB"). A catalog
    whose newest date is more than 180 days before `today` (default: today) gets a
    StallscopeWarning saying how old it is and how to refresh it."""
    source = Path(path) if path is not None else shipped_catalog_path()
    table = read_text_table(source, "instance catalog")
    catalog = _parse_catalog(table)
    if prices is not None:
        catalog = _apply_prices(catalog, read_text_table(Path(prices), "price file"))
    _flag_age(catalog, source, path is None, today or datetime.date.today())
    return catalog


def filter_catalog(
    catalog: pl.DataFrame,
    gpus: Sequence[str] | None = None,
    clouds: Sequence[str] | None = None,
    region: str | None = None,
) -> pl.DataFrame:
    """The rows of `catalog` with one of `gpus`, on one of `clouds`, in `region` (each None:
    any). A GPU family ("H100") selects every variant ("H100-PCIe"); a spelling with memory
    ("A100-80GB") selects that part. Unknown GPU names raise CatalogError."""
    keep = pl.lit(True)
    if gpus:
        wanted: list[str] = []
        for spelling in gpus:
            wanted.extend(family_members(spelling) or (gpu_device(spelling).name,))
        keep = keep & pl.col("gpu").is_in(wanted)
    if clouds:
        keep = keep & pl.col("cloud").is_in([c.strip().lower() for c in clouds])
    if region:
        keep = keep & (pl.col("region") == region)
    return catalog.filter(keep)


def _parse_catalog(table: TextTable) -> pl.DataFrame:
    check_columns(table, CATALOG_COLUMNS, (), "instance catalog")
    p = Problems(table, "instance catalog")
    cols: dict[str, list[object]] = {
        "cloud": [c.lower() for c in text_column(p, "cloud")],
        "region": list(text_column(p, "region")),
        "instance": list(text_column(p, "instance")),
        "gpus": list(number_column(p, "gpus", whole=True, low=1, high=MAX_GPUS)),
        "gpu_memory_gb": list(number_column(p, "gpu_memory_gb")),
        "vcpus": list(number_column(p, "vcpus", whole=True)),
        "memory_gb": list(number_column(p, "memory_gb")),
        "intra_node_GBps": list(number_column(p, "intra_node_GBps")),
        "network_gbps": list(
            number_column(
                p, "network_gbps", nullable=True, empty_means="where the cloud publishes none"
            )
        ),
        "price_per_hour": list(number_column(p, "price_per_hour")),
        "spot_price_per_hour": list(
            number_column(p, "spot_price_per_hour", nullable=True, empty_means=_SPOT_EMPTY)
        ),
        "source": list(text_column(p, "source")),
        "date": list(date_column(p, "date")),
    }
    cols["gpu"] = list(_gpu_column(p, cols["gpu_memory_gb"]))
    cols = {c: cols[c] for c in CATALOG_COLUMNS}
    _check_spot(p, cols, range(table.height))
    _check_unique(p, cols, "instance catalog")
    p.check()
    return pl.DataFrame(cols, schema=CATALOG_SCHEMA)


def _gpu_column(p: Problems, memory: list[object]) -> list[str]:
    """Each row's GPU as the device table names it, from the gpu cell and the row's memory."""
    out: list[str] = []
    for i, v in enumerate(p.table.cells["gpu"]):
        given = memory[i]
        mem = given if isinstance(given, float) else None
        name = ""
        if v is None:
            p.add(i, "gpu", "empty; expected a GPU the device table knows")
        else:
            try:
                name = gpu_device(v, mem).name
            except CatalogError as e:
                p.add(i, _gpu_fault(v, mem), str(e))
        out.append(name)
    return out


def _gpu_fault(spelling: str, memory: float | None) -> str:
    """The column at fault when a GPU does not resolve: its memory when the spelling names a
    device (or a family) that exists with another memory, else the gpu cell."""
    if memory is None:
        return "gpu"
    try:
        gpu_device(spelling)
    except CatalogError:
        return "gpu"
    return "gpu_memory_gb"


def _check_spot(p: Problems, cols: dict[str, list[object]], rows: range) -> None:
    for i in rows:
        spot, price = cols["spot_price_per_hour"][i], cols["price_per_hour"][i]
        if isinstance(spot, float) and isinstance(price, float) and spot > price:
            p.add(
                i,
                "spot_price_per_hour",
                f"{spot:g} is above price_per_hour {price:g}; a spot price is at most the "
                f"on-demand price (leave the cell empty {_SPOT_EMPTY})",
            )


def _check_unique(p: Problems, cols: dict[str, list[object]], what: str) -> None:
    seen: dict[tuple[object, ...], int] = {}
    for i, key in enumerate(zip(*(cols[k] for k in _KEY), strict=True)):
        if key in seen:
            p.add(i, "instance", f"{key} is listed twice in this {what} (also row {seen[key] + 1})")
        else:
            seen[key] = i


def _apply_prices(catalog: pl.DataFrame, table: TextTable) -> pl.DataFrame:
    check_columns(table, PRICE_COLUMNS, PRICE_OPTIONAL, "price file")
    p = Problems(table, "price file")
    cols: dict[str, list[object]] = {
        "cloud": [c.lower() for c in text_column(p, "cloud")],
        "region": list(text_column(p, "region")),
        "instance": list(text_column(p, "instance")),
        "price_per_hour": list(number_column(p, "price_per_hour")),
        "date": list(date_column(p, "date")),
    }
    has_spot = "spot_price_per_hour" in table.columns
    if has_spot:
        cols["spot_price_per_hour"] = list(
            number_column(p, "spot_price_per_hour", nullable=True, empty_means=_SPOT_EMPTY)
        )
    default_source = f"price file {table.path}"
    given = table.cells.get("source") or [None] * table.height
    cols["source"] = [s or default_source for s in given]
    _check_unique(p, cols, "price file")
    p.check()

    rows = {key: i for i, key in enumerate(catalog.select(_KEY).iter_rows())}
    for i, key in enumerate(zip(*(cols[k] for k in _KEY), strict=True)):
        if key not in rows:
            p.add(
                i,
                "instance",
                f"{key} is not in the catalog; a price file only updates "
                "rows the catalog has (check the cloud, region and instance names)",
            )
    p.check()

    out = catalog.to_dict(as_series=False)
    for i, key in enumerate(zip(*(cols[k] for k in _KEY), strict=True)):
        r = rows[key]
        out["price_per_hour"][r] = cols["price_per_hour"][i]
        if has_spot:
            out["spot_price_per_hour"][r] = cols["spot_price_per_hour"][i]
        out["source"][r] = f"{cols['source'][i]} ; {out['source'][r]}"
        out["date"][r] = cols["date"][i]
        spot, price = out["spot_price_per_hour"][r], out["price_per_hour"][r]
        if spot is not None and price is not None and spot > price:
            p.add(
                i,
                "price_per_hour" if not has_spot else "spot_price_per_hour",
                f"leaves {key} with spot price {spot:g} above its on-demand price {price:g}; "
                "give both prices for this row",
            )
    p.check()
    return pl.DataFrame(out, schema=CATALOG_SCHEMA)


def _flag_age(catalog: pl.DataFrame, source: Path, shipped: bool, today: datetime.date) -> None:
    if catalog.height == 0:
        return
    newest = catalog["date"].max()
    assert isinstance(newest, datetime.date)
    age = (today - newest).days
    if age <= MAX_AGE_DAYS:
        return
    name = f"the catalog shipped with stallscope ({source})" if shipped else str(source)
    warnings.warn(
        f"{name}: its newest price is from {newest.isoformat()}, {age} days ago (more than "
        f"{MAX_AGE_DAYS}); prices may have changed since. Refresh them: pass a current "
        "catalog with --catalog FILE or current prices with --prices FILE "
        "(load_catalog(path=..., prices=...) in Python)",
        StallscopeWarning,
        stacklevel=3,
    )
