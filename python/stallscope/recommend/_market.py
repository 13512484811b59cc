"""On-demand and spot rows of evaluated configurations: the hours and cost each market gives,
and the risk of missing a time budget.

Columns added: market ("on-demand" / "spot"), hourly (that market's $ per hour for the whole
configuration), rate (interruptions per hour of the configuration), work_hours (hours without
interruptions), hours and cost (expected, for spot), interruptions (expected), risk (the
probability of taking longer than the time budget; null without one).
"""

from __future__ import annotations

import polars as pl

from stallscope.recommend._candidates import Excluded
from stallscope.recommend._spot import (
    SpotModel,
    expected_hours,
    expected_interruptions,
    miss_probability,
)
from stallscope.recommend._spot_rates import SpotRates


def on_demand(frame: pl.DataFrame) -> pl.DataFrame:
    """The configurations at on-demand prices."""
    return frame.drop("spot_hourly").with_columns(
        market=pl.lit("on-demand"),
        rate=pl.lit(0.0),
        work_hours=pl.col("hours"),
        interruptions=pl.lit(0.0),
    )


def spot_rows(
    frame: pl.DataFrame, rates: SpotRates, model: SpotModel, excluded: Excluded
) -> pl.DataFrame:
    """The configurations with a spot price and an interruption rate, at spot prices, with
    their expected hours, cost and interruptions; the others go to ``excluded``."""
    priced = frame.filter(pl.col("spot_hourly").is_not_null())
    for (cloud, region, instance), part in frame.filter(pl.col("spot_hourly").is_null()).group_by(
        "cloud", "region", "instance", maintain_order=True
    ):
        excluded.add(
            {"cloud": cloud, "region": region, "instance": instance},
            part["count"].to_list(),
            "spot: the catalog has no spot price for this instance",
        )
    config_rates = [
        rates.config_rate(cloud, region, parts)
        for cloud, region, parts in priced.select("cloud", "region", "parts").iter_rows()
    ]
    priced = priced.with_columns(rate=pl.Series(config_rates, dtype=pl.Float64))
    for (cloud, region, instance), part in priced.filter(pl.col("rate").is_null()).group_by(
        "cloud", "region", "instance", maintain_order=True
    ):
        excluded.add(
            {"cloud": cloud, "region": region, "instance": instance},
            part["count"].to_list(),
            "spot: no interruption rate for this instance type (give one with "
            "--interruption-rate, or a table with --interruptions FILE)",
        )
    priced = priced.filter(pl.col("rate").is_not_null())
    work = priced["hours"].to_list()
    rate = priced["rate"].to_list()
    hours = [expected_hours(w, r, model) for w, r in zip(work, rate, strict=True)]
    fails = [expected_interruptions(w, r, model) for w, r in zip(work, rate, strict=True)]
    return (
        priced.with_columns(
            market=pl.lit("spot"),
            hourly=pl.col("spot_hourly"),
            work_hours=pl.col("hours"),
            hours=pl.Series(hours, dtype=pl.Float64),
            interruptions=pl.Series(fails, dtype=pl.Float64),
        )
        .with_columns(cost=pl.col("hours") * pl.col("hourly"))
        .drop("spot_hourly")
        .select(on_demand(frame.head(0)).columns)
    )


def with_risk(frame: pl.DataFrame, model: SpotModel, budget: float | None) -> pl.DataFrame:
    """``frame`` with ``risk``: the probability that each configuration takes longer than
    ``budget`` hours (on demand: 0 or 1; spot: from the interruption model); null without a
    budget."""
    if budget is None:
        return frame.with_columns(risk=pl.lit(None, dtype=pl.Float64))
    risk = [
        (1.0 if work > budget else 0.0)
        if rate == 0
        else miss_probability(work, rate, model, budget)
        for work, rate in frame.select("work_hours", "rate").iter_rows()
    ]
    return frame.with_columns(risk=pl.Series(risk, dtype=pl.Float64))
