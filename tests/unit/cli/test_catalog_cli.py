"""`stallscope catalog`: the table, the filters, JSON out, user catalogs and prices, and the exit
codes of bad input."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from stallscope.cli.main import cli
from stallscope.recommend import CATALOG_COLUMNS, shipped_catalog_path


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["catalog", *args])


def test_table_of_the_shipped_catalog_with_its_age_warning() -> None:
    res = _run()
    assert res.exit_code == 0, res.output
    for name in ("p5.48xlarge", "a3-highgpu-8g", "Standard_ND96asr_v4", "gpu_8x_h100_sxm5"):
        assert name in res.stdout
    assert "44 instance(s)" in res.stdout
    # The shipped prices are older than 180 days: said once, on stderr, in the CLI's format.
    assert res.stderr.count("warning: ") == 1 and "--prices FILE" in res.stderr


def test_filters_select_rows() -> None:
    res = _run("--gpu", "H100", "--cloud", "aws,gcp")
    assert res.exit_code == 0, res.output
    assert "p5.48xlarge" in res.stdout and "a3-highgpu-8g" in res.stdout
    assert "g5.xlarge" not in res.stdout and "gpu_8x_h100_sxm5" not in res.stdout
    res = _run("--gpu", "L4", "--region", "us-central1")
    assert "g2-standard-96" in res.stdout and "g6.xlarge" not in res.stdout


def test_json_file_has_exactly_the_catalog_columns(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    res = _run("--gpu", "A100-80GB", "--json", str(out))
    assert res.exit_code == 0, res.output
    rows = orjson.loads(out.read_bytes())
    assert len(rows) > 0 and f"wrote {len(rows)} row(s) to {out}" in res.stderr
    for r in rows:
        assert tuple(r) == CATALOG_COLUMNS
        assert r["gpu"] == "A100-SXM4-80GB" and r["gpu_memory_gb"] == 80
        assert r["source"].startswith("https://") and len(r["date"]) == 10
    assert "Standard_ND96amsr_A100_v4" in res.stdout  # the table too


def test_json_to_stdout_only() -> None:
    res = _run("--cloud", "lambda", "--json", "-")
    assert res.exit_code == 0, res.output
    rows = orjson.loads(res.stdout)
    assert {r["cloud"] for r in rows} == {"lambda"} and len(rows) == 7
    assert all(r["spot_price_per_hour"] is None for r in rows)  # Lambda sells no spot


def test_user_catalog_and_prices(tmp_path: Path) -> None:
    lines = shipped_catalog_path().read_text().splitlines()
    mine = tmp_path / "mine.csv"
    mine.write_text("\n".join(lines[:4]).replace("2025-06-01", "2026-11-20") + "\n")
    prices = tmp_path / "prices.csv"
    prices.write_text(
        "cloud,region,instance,price_per_hour,spot_price_per_hour,date\n"
        "aws,us-east-1,g4dn.xlarge,0.5,0.2,2026-11-25\n"
    )
    res = _run("--catalog", str(mine), "--prices", str(prices), "--json", "-")
    assert res.exit_code == 0, res.output
    assert res.stderr == ""  # a recent catalog: no age warning
    rows = {r["instance"]: r for r in orjson.loads(res.stdout)}
    assert len(rows) == 3
    assert rows["g4dn.xlarge"]["price_per_hour"] == 0.5
    assert rows["g4dn.xlarge"]["date"] == "2026-11-25"


def test_no_match_is_said_not_an_error() -> None:
    res = _run("--region", "mars-1")
    assert res.exit_code == 0
    assert "no instance in the catalog matches --region mars-1" in res.stderr


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (("--gpu", "X100"), 2, "unknown GPU 'X100'"),
        (("--cloud", "awz"), 2, "no cloud awz in the catalog"),
        (("--catalog", "/nonexistent/cat.csv"), 2, "does not exist"),
        (("--bogus",), 2, "No such option"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], code: int, text: str) -> None:
    res = _run(*args)
    assert res.exit_code == code, res.output
    assert text in res.output


def test_malformed_catalog_exits_1_naming_row_and_column(tmp_path: Path) -> None:
    lines = shipped_catalog_path().read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([lines[0], lines[1].replace(",0.526,", ",cheap,")]) + "\n")
    res = _run("--catalog", str(bad))
    assert res.exit_code == 1
    assert f"{bad}, row 1, column price_per_hour: 'cheap' is not a number" in res.stderr
    assert "Traceback" not in res.output
