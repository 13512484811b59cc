"""The answers over evaluated configurations (one row each with ``hours`` and ``cost``): the
Pareto front of time against cost, the cheapest within a time budget and the fastest within a
cost budget.

A configuration is on the Pareto front when no other one is at least as fast and as cheap and
strictly better in one of the two. Ties are broken, for a stable answer, by the other figure
and then by the configuration's name and market.
"""

from __future__ import annotations

from typing import Any

import polars as pl


def pareto_mask(frame: pl.DataFrame) -> pl.Series:
    """True for the rows of ``frame`` on the Pareto front of (hours, cost), in row order."""
    if frame.height == 0:
        return pl.Series("pareto", [], dtype=pl.Boolean)
    ranked = (
        frame.select("hours", "cost")
        .with_row_index("_row")
        .with_columns(
            _group_min=pl.col("cost").min().over("hours"),
        )
        .sort("hours", "cost")
    )
    # The cheapest cost among rows strictly faster than each row's group.
    groups = (
        ranked.group_by("hours", maintain_order=True)
        .agg(pl.col("cost").min().alias("_min"))
        .with_columns(_before=pl.col("_min").cum_min().shift(1))
    )
    ranked = ranked.join(groups.select("hours", "_before"), on="hours", how="left")
    on_front = (pl.col("cost") == pl.col("_group_min")) & (
        pl.col("_before").is_null() | (pl.col("_group_min") < pl.col("_before"))
    )
    return ranked.with_columns(pareto=on_front).sort("_row")["pareto"]


def cheapest(frame: pl.DataFrame) -> dict[str, Any] | None:
    """The cheapest row of ``frame`` (ties: the faster, then by name), None when empty."""
    if frame.height == 0:
        return None
    return frame.sort("cost", "hours", "config", "market").row(0, named=True)


def fastest(frame: pl.DataFrame) -> dict[str, Any] | None:
    """The fastest row of ``frame`` (ties: the cheaper, then by name), None when empty."""
    if frame.height == 0:
        return None
    return frame.sort("hours", "cost", "config", "market").row(0, named=True)


def objective_order(frame: pl.DataFrame, by_time_budget: bool) -> pl.DataFrame:
    """``frame`` with the rows that meet the budget first, each part best first: cheapest first
    under a time budget, fastest first under a cost budget."""
    keys = ["cost", "hours"] if by_time_budget else ["hours", "cost"]
    return frame.sort([pl.col("meets").not_(), *keys, "config", "market"])
