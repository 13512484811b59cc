"""Why the recommended configuration wins, in words: what it costs and takes, and where its
step differs from the best configuration of another instance type."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from stallscope.analysis import STALL_COLUMNS

#: Stall columns compared when explaining (compute is the work itself, not a stall).
_STALLS = tuple(c for c in STALL_COLUMNS if c != "compute_ns")
_MIN_SHARE_GAP = 0.02  # a stall costing under 2 % of the other's job time is not a reason


def hours_text(hours: float) -> str:
    """3.2 days / 10.2 h / 35 min / 12 s."""
    if hours >= 72:
        return f"{hours / 24:.3g} days"
    if hours >= 1:
        return f"{hours:.3g} h"
    if hours * 60 >= 1:
        return f"{hours * 60:.3g} min"
    return f"{hours * 3600:.3g} s"


def cost_text(cost: float) -> str:
    """$1,234 / $12.35 / $0.0042."""
    if cost >= 100:
        return f"${cost:,.0f}"
    return f"${cost:,.2f}" if cost >= 1 else f"${cost:.2g}"


def short(x: float) -> str:
    """Two significant digits below 10 (0.0011, 2.5), whole numbers above (12, 1,234)."""
    return f"{x:.2g}" if abs(x) < 10 else f"{x:,.0f}"


def stall_name(column: str) -> str:
    """ "sync_wait_ns" -> "sync wait"."""
    return column.removesuffix("_ns").replace("_", " ")


def _share(row: dict[str, Any], column: str) -> float:
    step = row["step_ns"]
    return float(row[column]) / step if step else 0.0


def describe(row: dict[str, Any]) -> str:
    """ "p4d.24xlarge x 2 (aws us-east-1, spot)"."""
    return f"{row['config']} ({row['cloud']} {row['region']}, {row['market']})"


def runner_up(frame: pl.DataFrame, best: dict[str, Any], by_time_budget: bool) -> dict[str, Any]:
    """The configuration of another instance type to compare ``best`` with: the best of them
    that meets the budget, else the one closest to meeting it (the fastest under a time budget,
    the cheapest under a cost budget); {} when there is no other type. ``frame`` is in
    objective order (those meeting the budget first)."""
    others = frame.filter(pl.col("instance") != best["instance"])
    if others.height == 0:
        return {}
    if others["meets"].any():
        return others.row(0, named=True)
    keys = ["hours", "cost"] if by_time_budget else ["cost", "hours"]
    return others.sort([*keys, "config", "market"]).row(0, named=True)


def why(
    best: dict[str, Any],
    frame: pl.DataFrame,
    by_time_budget: bool,
    budget_text: str,
) -> str:
    """Two or three sentences on why ``best`` wins (``frame``: every configuration, in
    objective order)."""
    meeting = int(frame["meets"].sum())
    what = "cheapest" if by_time_budget else "fastest"
    within = f"finish within {budget_text}" if by_time_budget else f"cost at most {budget_text}"
    lines = [
        f"{describe(best)}: {hours_text(best['hours'])} for {cost_text(best['cost'])}, the "
        f"{what} of {meeting} configuration(s) that {within}."
    ]
    if best["market"] == "spot":
        lines.append(
            f"Spot: {short(best['interruptions'])} interruption(s) expected, "
            f"{short(100 * best['risk'])} % risk of missing {budget_text}."
            if best["risk"] is not None
            else f"Spot: {short(best['interruptions'])} interruption(s) expected."
        )
    other = runner_up(frame, best, by_time_budget)
    if other:
        lines.append(_against(best, _comparable(frame, best, other), by_time_budget))
    return " ".join(lines)


def _comparable(frame: pl.DataFrame, best: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """What to compare ``best``'s step with: ``other`` when it meets the budget (the real
    alternative), else ``other``'s type on as many ranks as ``best`` (why that type cannot do
    the job as well), when the catalog has it."""
    if other["meets"]:
        return other
    same = frame.filter(
        (pl.col("instance") == other["instance"])
        & (pl.col("market") == other["market"])
        & (pl.col("ranks") == best["ranks"])
    )
    return same.row(0, named=True) if same.height else other


def _against(best: dict[str, Any], other: dict[str, Any], by_time_budget: bool) -> str:
    """Why ``best`` beats ``other``. Under a time budget the cost ratio is the price per
    GPU-hour ratio times the GPU-hours ratio: when the price weighs more, the price is the
    reason. Otherwise the stall that costs ``other`` the most time over the whole job beyond
    what it costs ``best``, as shares of their steps; else the faster step or the lower
    price."""
    if math.isclose(best["cost"], other["cost"], rel_tol=0.005) and math.isclose(
        best["hours"], other["hours"], rel_tol=0.005
    ):
        return (
            f"{describe(other)} is as good ({hours_text(other['hours'])}, "
            f"{cost_text(other['cost'])}): either will do."
        )
    miss = "" if other["meets"] else ", which misses the budget"
    tail = (
        f"{other['config']} ({other['market']}: {hours_text(other['hours'])}, "
        f"{cost_text(other['cost'])}{miss})"
    )
    gpu_hours = (best["hours"] * best["ranks"], other["hours"] * other["ranks"])
    per = (best["cost"] / gpu_hours[0], other["cost"] / gpu_hours[1])
    if by_time_budget and min(*gpu_hours, *per) > 0:
        price, time = math.log(per[1] / per[0]), math.log(gpu_hours[1] / gpu_hours[0])
        if price > 0 and price >= time:
            return (
                f"{best['config']}: {cost_text(per[0])} per GPU-hour against "
                f"{cost_text(per[1])} on {tail}; the work takes {gpu_hours[0]:.3g} GPU-hours "
                f"here and {gpu_hours[1]:.3g} there."
            )
    extra = sorted(
        ((other[c] * other["steps"] - best[c] * best["steps"], c) for c in _STALLS),
        reverse=True,
    )
    gap, column = extra[0]
    job_ns = other["step_ns"] * other["steps"]
    if job_ns > 0 and gap / job_ns >= _MIN_SHARE_GAP:
        return (
            f"{best['config']}: {stall_name(column)} stall {100 * _share(best, column):.0f} % "
            f"of its step against {100 * _share(other, column):.0f} % on {tail}."
        )
    if best["step_ns"] < other["step_ns"]:
        return (
            f"{best['config']}: a step takes {best['step_ns'] / 1e6:.3g} ms against "
            f"{other['step_ns'] / 1e6:.3g} ms on {tail}."
        )
    return (
        f"{best['config']}: {cost_text(best['hourly'])} per hour against "
        f"{cost_text(other['hourly'])} for {tail}."
    )
