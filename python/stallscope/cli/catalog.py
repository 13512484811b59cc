"""`stallscope catalog`: the cloud instances a training job could run on, with their prices."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click
import polars as pl

# Table headers (the title gives the units where a header has none).
_LABELS = {
    "gpu_memory_gb": "GPU GB",
    "vcpus": "vCPUs",
    "memory_gb": "memory GB",
    "intra_node_GBps": "GPU link GB/s",
    "network_gbps": "network Gbit/s",
    "price_per_hour": "$/hour",
    "spot_price_per_hour": "spot $/hour",
    "date": "as of",
}
_DIGITS = {
    "gpu_memory_gb": 0,
    "memory_gb": 0,
    "intra_node_GBps": 0,
    "network_gbps": 0,
    "price_per_hour": 3,
    "spot_price_per_hour": 3,
}


def _split(values: tuple[str, ...]) -> list[str]:
    """ "a,b" "c" -> [a, b, c]."""
    return [v.strip() for arg in values for v in arg.split(",") if v.strip()]


@click.command(short_help="GPU cloud instances: prices, bandwidths, sources.")
@click.option(
    "--gpu",
    "gpus",
    multiple=True,
    metavar="NAME[,NAME]",
    help="Only these GPUs: a model (H100 selects every H100 variant) or a model with its "
    "memory (A100-80GB).",
)
@click.option(
    "--cloud", "clouds", multiple=True, metavar="CLOUD[,CLOUD]", help="Only these clouds."
)
@click.option("--region", help="Only this region (as the cloud spells it: us-east-1).")
@click.option(
    "--catalog",
    "catalog_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Use this catalog (CSV, Parquet or JSON with the shipped catalog's columns) instead "
    "of the shipped one.",
)
@click.option(
    "--prices",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Current prices for some rows: a file with cloud, region, instance, price_per_hour, "
    "date (and optionally spot_price_per_hour, source).",
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Also write the selected rows as JSON (a list of rows with the catalog's columns); "
    "- writes them to stdout instead of the table.",
)
def catalog(
    gpus: tuple[str, ...],
    clouds: tuple[str, ...],
    region: str | None,
    catalog_file: Path | None,
    prices: Path | None,
    json_file: Path | None,
) -> None:
    """GPU instances of AWS, GCP, Azure and Lambda with their on-demand and spot prices per
    hour, GPU interconnect and network bandwidth; every row names its source and date."""
    from stallscope.exceptions import CatalogError
    from stallscope.recommend import filter_catalog, load_catalog

    wanted_gpus, wanted_clouds = _split(gpus), [c.lower() for c in _split(clouds)]
    try:
        filter_catalog(pl.DataFrame(schema={"gpu": pl.String}), wanted_gpus)
    except CatalogError as e:
        raise click.BadParameter(str(e), param_hint="--gpu") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            table = load_catalog(catalog_file, prices)
        except CatalogError as e:
            raise click.ClickException(str(e)) from None
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)
    present = sorted(set(table["cloud"].to_list()))
    unknown = [c for c in wanted_clouds if c not in present]
    if unknown:
        raise click.BadParameter(
            f"no cloud {', '.join(unknown)} in the catalog; its clouds: {', '.join(present)}",
            param_hint="--cloud",
        )
    rows = filter_catalog(table, wanted_gpus, wanted_clouds, region)
    if json_file is not None:
        _write_json(rows, json_file)
        if str(json_file) == "-":
            return
    if rows.height == 0:
        click.echo(_nothing_matches(table, wanted_gpus, wanted_clouds, region), err=True)
        return
    _print_rows(rows, catalog_file)


def _write_json(rows: pl.DataFrame, out: Path) -> None:
    import orjson

    data = orjson.dumps(rows.to_dicts(), option=orjson.OPT_INDENT_2) + b"\n"
    if str(out) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    from stallscope.cli._paths import output_file, write_error

    try:
        output_file(out).write_bytes(data)
    except OSError as e:
        raise write_error(out, e) from None
    click.echo(f"wrote {rows.height} row(s) to {out}", err=True)


def _nothing_matches(
    table: pl.DataFrame, gpus: list[str], clouds: list[str], region: str | None
) -> str:
    asked = " ".join(
        [f"--gpu {','.join(gpus)}"] * bool(gpus)
        + [f"--cloud {','.join(clouds)}"] * bool(clouds)
        + [f"--region {region}"] * bool(region)
    )
    regions = ", ".join(sorted(set(table["region"].to_list())))
    return f"no instance in the catalog matches {asked}; its regions: {regions}"


def _print_rows(rows: pl.DataFrame, catalog_file: Path | None) -> None:
    from stallscope.cli.render import print_frame

    shown = rows.drop("source").with_columns(pl.col("date").cast(pl.String))
    name = str(catalog_file) if catalog_file else "shipped catalog"
    print_frame(
        shown,
        title=f"GPU instances ({name}; prices in USD per hour, on-demand and spot)",
        max_rows=1000,
        digits=_DIGITS,
        labels=_LABELS,
    )
    dates = rows["date"].sort()
    click.echo(
        f"{rows.height} instance(s); prices as of {dates[0]} to {dates[-1]}. "
        "Sources per row: --json FILE, or the catalog file's source column."
    )
