"""A recommendation's Pareto front: the configurations that no other beats on both time and
cost (stallscope.recommend's Recommendation.pareto frame: config, market, cloud, hours, cost,
...)."""

from __future__ import annotations

import polars as pl

from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, figure, table
from stallscope.report._style import SERIES_COLORS, ms

MAX_LABELS = 8  # configurations named on the plot (the table names them all)


def _three(v: float) -> str:
    """Three significant digits, thousands separated: 0.00512, 1.73, 1,300."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def render(data: ReportData) -> str | NoData:
    from stallscope.report._plot import pyplot, svg

    front = data.pareto
    if front is None or front.height == 0:
        return NoData(
            "no recommendation was given (stallscope.recommend's Recommendation.pareto frame)"
        )
    if not {"hours", "cost"} <= set(front.columns):
        return NoData(f"the Pareto frame lacks hours and cost (it has {front.columns})")
    f = front.sort("hours")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    ax.plot(f["hours"].to_numpy(), f["cost"].to_numpy(), color="#999999", lw=1, zorder=1)
    markets = f["market"].to_list() if "market" in f.columns else ["?"] * f.height
    for i, m in enumerate(sorted(set(markets))):
        part = f.filter(pl.Series(markets) == m)
        ax.scatter(
            part["hours"].to_numpy(),
            part["cost"].to_numpy(),
            s=28,
            color=SERIES_COLORS[i % len(SERIES_COLORS)],
            label=m,
            zorder=2,
        )
    if "config" in f.columns:  # the fastest, the cheapest and a few between, not a crowd
        rows = f.select("hours", "cost", "config").rows()
        step = max(1, (len(rows) - 1) // (MAX_LABELS - 1))
        for i, (h, c, name) in enumerate(rows):
            if i % step == 0 or i == len(rows) - 1:
                ax.annotate(
                    str(name), (h, c), fontsize=7, xytext=(4, 3), textcoords="offset points"
                )
    if f["hours"].min() > 0 and f["cost"].min() > 0:  # type: ignore[operator]
        ax.set_xscale("log")  # fronts span decades of time and money
        ax.set_yscale("log")
    ax.set_xlabel("hours to finish")
    ax.set_ylabel("cost, USD")
    ax.legend(frameon=False, title="market")
    fmt = {"hours": _three, "cost": lambda v: f"${_three(v)}", "step_ns": ms}
    if "risk" in f.columns:
        fmt["risk"] = lambda v: f"{v:.2f}" if isinstance(v, float) else str(v)
    return (
        '<p class="lead">Faster costs more along the front; every configuration off it is '
        "slower and dearer than one on it.</p>"
        + figure(
            svg(fig, "pareto"), "Hours against cost of the configurations on the Pareto front."
        )
        + table(f, formats=fmt)
    )


SECTION = Section("pareto", "Recommendation: time against cost", render)
