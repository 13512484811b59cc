"""The instance catalog: the shipped file's contents, user catalogs in each format, price
overrides, selections, every kind of malformed input, and the age flag."""

from __future__ import annotations

import csv
import datetime
import io
from pathlib import Path

import orjson
import polars as pl
import pytest

from stallscope.exceptions import CatalogError, StallscopeWarning
from stallscope.recommend import (
    CATALOG_COLUMNS,
    filter_catalog,
    gpu_device,
    load_catalog,
    shipped_catalog_path,
)

SHIPPED = shipped_catalog_path()


def _shipped_rows() -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(SHIPPED.read_text())))


def _newest() -> datetime.date:
    return max(datetime.date.fromisoformat(r["date"]) for r in _shipped_rows())


@pytest.fixture(scope="module")
def shipped() -> pl.DataFrame:
    return load_catalog(today=_newest())  # as of its own newest date: not flagged


def _write(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    columns = columns or list(rows[0])
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def _small(tmp_path: Path, **changes: str) -> Path:
    """The shipped catalog's first three rows, the second one changed (column=value)."""
    rows = _shipped_rows()[:3]
    rows[1].update(changes)
    return _write(tmp_path / "cat.csv", rows)


def _load_error(path: Path, **kw: object) -> str:
    with pytest.raises(CatalogError) as e:
        load_catalog(path, today=_newest(), **kw)  # type: ignore[arg-type]
    return str(e.value)


# --- the shipped catalog ---------------------------------------------------------------------


def test_shipped_file_has_exactly_the_columns_in_order() -> None:
    header = SHIPPED.read_text().splitlines()[0].split(",")
    assert tuple(header) == CATALOG_COLUMNS


def test_shipped_catalog_validates(shipped: pl.DataFrame) -> None:
    assert shipped.columns == list(CATALOG_COLUMNS)
    assert shipped.height >= 40
    assert {"aws", "gcp", "azure"} <= set(shipped["cloud"])
    assert set(shipped["cloud"]) & {"lambda", "runpod", "coreweave"}
    for r in shipped.iter_rows(named=True):
        key = (r["cloud"], r["region"], r["instance"])
        sources = r["source"].split(" ; ")
        assert sources and all(s.startswith("https://") for s in sources), key
        assert isinstance(r["date"], datetime.date), key
        assert r["price_per_hour"] > 0, key
        assert (
            r["spot_price_per_hour"] is None or 0 < r["spot_price_per_hour"] <= r["price_per_hour"]
        ), key
        assert 1 <= r["gpus"] <= 16, key
        assert r["gpu_memory_gb"] > 0 and r["vcpus"] > 0 and r["memory_gb"] > 0, key
        assert r["intra_node_GBps"] > 0, key
        assert r["network_gbps"] is None or r["network_gbps"] > 0, key
    assert shipped.select("cloud", "region", "instance").is_unique().all()


def test_shipped_catalog_covers_the_gpus_and_sizes(shipped: pl.DataFrame) -> None:
    have = set(zip(shipped["gpu"], shipped["gpu_memory_gb"], strict=True))
    for gpu, mem in [
        ("V100-SXM2-16GB", 16),
        ("A100-SXM4-40GB", 40),
        ("A100-SXM4-80GB", 80),
        ("H100-SXM", 80),
        ("H200-SXM", 141),
    ]:
        assert (gpu, mem) in have
    assert {"A10G", "L4", "T4", "L40S"} <= set(shipped["gpu"])
    assert {1, 4, 8} <= set(shipped["gpus"])
    for cloud in ("aws", "gcp", "azure", "lambda"):  # each cloud has 1-GPU and 8-GPU shapes
        sizes = set(shipped.filter(pl.col("cloud") == cloud)["gpus"])
        assert {1, 8} <= sizes, cloud


def test_shipped_catalog_is_flagged_once_old(shipped: pl.DataFrame) -> None:
    newest = _newest()
    load_catalog(today=newest + datetime.timedelta(days=180))  # not yet (warnings are errors)
    with pytest.warns(StallscopeWarning) as got:
        load_catalog(today=newest + datetime.timedelta(days=181))
    (w,) = got
    msg = str(w.message)
    assert "181 days" in msg and newest.isoformat() in msg
    assert "--catalog FILE" in msg and "--prices FILE" in msg


def test_user_catalog_age_names_the_file(tmp_path: Path) -> None:
    rows = _shipped_rows()[:2]
    for r in rows:
        r["date"] = "2020-01-31"
    path = _write(tmp_path / "old.csv", rows)
    with pytest.warns(StallscopeWarning, match=r"old\.csv.*2020-01-31, 366 days ago"):
        load_catalog(path, today=datetime.date(2021, 1, 31))


# --- other formats and selections ------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json"])
def test_user_catalog_in_each_format(shipped: pl.DataFrame, tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"mine{suffix}"
    if suffix == ".csv":
        shipped.write_csv(path)
    elif suffix == ".parquet":
        shipped.write_parquet(path)
    else:
        path.write_bytes(orjson.dumps(shipped.to_dicts()))
    got = load_catalog(path, today=_newest())
    assert got.equals(shipped)


def test_gpu_spellings_resolve_through_the_device_table() -> None:
    assert gpu_device("a100-80gb").name == "A100-SXM4-80GB"
    assert gpu_device("A100", 40).name == "A100-SXM4-40GB"  # a model with the row's memory
    assert gpu_device("a100", 80).name == "A100-SXM4-80GB"
    assert gpu_device("V100", 32).name == "V100-SXM2-32GB"
    assert gpu_device("H100", 80).name == "H100-SXM"
    assert gpu_device("h100_pcie").name == "H100-PCIe"
    assert gpu_device("Tesla V100-SXM2-32GB", 32).name == "V100-SXM2-32GB"
    with pytest.raises(CatalogError, match=r"unknown GPU 'X100'.*known GPUs: V100-SXM2-16GB"):
        gpu_device("X100")
    with pytest.raises(CatalogError, match=r"no A100 part with 48 GB.*A100-SXM4-40GB 40 GB"):
        gpu_device("A100", 48)
    with pytest.raises(CatalogError, match=r"is the A100-SXM4-80GB, which has 80 GB, not 40"):
        gpu_device("A100-80GB", 40)


def test_filters(shipped: pl.DataFrame) -> None:
    h100 = filter_catalog(shipped, gpus=["H100"])
    assert set(h100["gpu"]) == {"H100-SXM", "H100-PCIe"}  # the family selects every part
    assert set(filter_catalog(shipped, gpus=["H100-PCIe"])["gpu"]) == {"H100-PCIe"}
    a100_80 = filter_catalog(shipped, gpus=["A100-80GB"])
    assert a100_80.height > 0 and set(a100_80["gpu_memory_gb"]) == {80.0}
    both = filter_catalog(shipped, gpus=["L4", "T4"], clouds=["AWS", "gcp"])
    assert set(both["gpu"]) == {"L4", "T4"} and set(both["cloud"]) == {"aws", "gcp"}
    east = filter_catalog(shipped, clouds=["aws"], region="us-east-1")
    assert east.height == shipped.filter(pl.col("cloud") == "aws").height
    assert filter_catalog(shipped, region="nowhere-1").height == 0
    with pytest.raises(CatalogError, match=r"unknown GPU 'X100'.*known GPUs: V100"):
        filter_catalog(shipped, gpus=["X100"])


# --- price overrides -------------------------------------------------------------------------


def test_prices_override_price_source_and_date(shipped: pl.DataFrame, tmp_path: Path) -> None:
    prices = tmp_path / "prices.csv"
    prices.write_text(
        "cloud,region,instance,price_per_hour,spot_price_per_hour,date,source\n"
        "AWS,us-east-1,p5.48xlarge,50.5,,2026-11-01,https://example.com/p5\n"
        "gcp,us-central1,g2-standard-4,0.6,0.25,2026-11-02,\n"
    )
    got = load_catalog(prices=prices, today=datetime.date(2026, 11, 27))  # now fresh
    p5 = got.filter(pl.col("instance") == "p5.48xlarge").row(0, named=True)
    assert p5["price_per_hour"] == 50.5 and p5["spot_price_per_hour"] is None
    assert p5["source"].startswith("https://example.com/p5 ; https://github.com/skypilot-org")
    assert p5["date"] == datetime.date(2026, 11, 1)
    g2 = got.filter(pl.col("instance") == "g2-standard-4").row(0, named=True)
    assert (g2["price_per_hour"], g2["spot_price_per_hour"]) == (0.6, 0.25)
    assert g2["source"].startswith(f"price file {prices} ; ")
    untouched = got.filter(~pl.col("instance").is_in(["p5.48xlarge", "g2-standard-4"]))
    assert untouched.equals(
        shipped.filter(~pl.col("instance").is_in(["p5.48xlarge", "g2-standard-4"]))
    )


def test_prices_for_an_unknown_row_or_without_date_fail(tmp_path: Path) -> None:
    bad = tmp_path / "prices.csv"
    bad.write_text(
        "cloud,region,instance,price_per_hour,date\naws,us-east-1,p5.48xlargee,50,2026-11-01\n"
    )
    msg = _load_error(SHIPPED, prices=bad)
    assert f"{bad}, row 1, column instance" in msg and "p5.48xlargee" in msg
    bad.write_text("cloud,region,instance,price_per_hour\naws,us-east-1,p5.48xlarge,50\n")
    assert "missing column(s) date" in _load_error(SHIPPED, prices=bad)


def test_prices_that_put_spot_above_on_demand_fail(tmp_path: Path) -> None:
    prices = tmp_path / "prices.csv"  # p5.48xlarge's spot (31.04) stays: above 20
    prices.write_text(
        "cloud,region,instance,price_per_hour,date\naws,us-east-1,p5.48xlarge,20,2026-11-01\n"
    )
    msg = _load_error(SHIPPED, prices=prices)
    assert "row 1, column price_per_hour" in msg and "give both prices" in msg


# --- malformed catalogs ----------------------------------------------------------------------


def test_missing_and_unknown_columns(tmp_path: Path) -> None:
    rows = _shipped_rows()[:2]
    cols = [c for c in CATALOG_COLUMNS if c != "price_per_hour"]
    msg = _load_error(_write(tmp_path / "a.csv", rows, cols))
    assert str(tmp_path / "a.csv") in msg and "missing column(s) price_per_hour" in msg
    for r in rows:
        r["price_hour"] = "1"
    msg = _load_error(_write(tmp_path / "b.csv", rows, [*CATALOG_COLUMNS, "price_hour"]))
    assert "unknown column(s) price_hour" in msg


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("price_per_hour", "cheap", "column price_per_hour: 'cheap' is not a number"),
        ("price_per_hour", "-3", "column price_per_hour: '-3' is negative"),
        ("price_per_hour", "0", "column price_per_hour: '0' is zero"),
        ("price_per_hour", "", "column price_per_hour: empty; expected a number"),
        ("spot_price_per_hour", "99", "column spot_price_per_hour: 99 is above price_per_hour"),
        ("spot_price_per_hour", "n/a", "leave the cell empty where the instance has no spot"),
        ("memory_gb", "-16", "column memory_gb: '-16' is negative"),
        ("gpus", "17", "column gpus: '17' is outside 1..16"),
        ("gpus", "2.5", "column gpus: '2.5' is not a whole number"),
        ("gpu", "X100", "column gpu: unknown GPU 'X100': nearest: "),
        ("gpu", "A100-80GB", "column gpu_memory_gb: 'A100-80GB' is the A100-SXM4-80GB, which has"),
        ("gpu", "A100", "column gpu_memory_gb: the device table has no A100 part with 16 GB"),
        ("date", "01/06/2025", "column date: '01/06/2025' is not a date; expected YYYY-MM-DD"),
        ("source", "", "column source: empty; expected a value"),
        ("instance", "g4dn.xlarge", "is listed twice in this instance catalog (also row 1)"),
    ],
)
def test_each_bad_cell_names_file_row_and_column(
    tmp_path: Path, column: str, value: str, expected: str
) -> None:
    path = _small(tmp_path, **{column: value})
    msg = _load_error(path)
    assert f"{path}, row 2" in msg, msg
    assert expected in msg, msg


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    rows = _shipped_rows()[:3]
    rows[0]["price_per_hour"] = "x"
    rows[2]["gpu"] = "Z9"
    msg = _load_error(_write(tmp_path / "c.csv", rows))
    assert "2 problem(s)" in msg and "row 1, column price_per_hour" in msg
    assert "row 3, column gpu" in msg


def test_unreadable_files(tmp_path: Path) -> None:
    assert "no such instance catalog file" in _load_error(tmp_path / "none.csv")
    (tmp_path / "cat.xlsx").write_text("x")
    assert "unknown instance catalog format .xlsx" in _load_error(tmp_path / "cat.xlsx")
    (tmp_path / "cat.json").write_text('{"cloud": "aws"}')
    assert "a list of objects, one per row" in _load_error(tmp_path / "cat.json")
    (tmp_path / "bad.json").write_text("[{")
    assert "not valid JSON" in _load_error(tmp_path / "bad.json")
    (tmp_path / "bad.parquet").write_text("not parquet")
    assert "not a readable instance catalog" in _load_error(tmp_path / "bad.parquet")
