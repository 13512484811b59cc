"""A recommendation's Pareto front: the configurations that no other beats on both time and
cost (stallscope.recommend's Recommendation.pareto frame: config, market, cloud, hours, cost,
...)."""

from __future__ import annotations

import polars as pl

from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, figure, table
from stallscope.report._style import SERIES_COLORS, ms

MAX_LABELS = 8  # configurations named on the plot (the table names them all)
MIN_GAP = 0.12  # a named point's least distance to another, as a share of the axes' span


def _three(v: float) -> str:
    """Three significant digits, thousands separated: 0.00512, 1.73, 1,300."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _spread(rows: list[tuple[float, float, object]], log: bool) -> list[int]:
    """Which points to name: the fastest and the cheapest, then others in order along the front
    when no named point is near them on the plot (MIN_GAP of the axes' span), MAX_LABELS at most."""
    import math

    def at(v: float) -> float:
        return math.log10(v) if log else v

    xs, ys = [at(r[0]) for r in rows], [at(r[1]) for r in rows]

    def unit(vs: list[float]) -> list[float]:
        lo, span = min(vs), (max(vs) - min(vs)) or 1.0
        return [(v - lo) / span for v in vs]

    pts = list(zip(unit(xs), unit(ys), strict=True))
    chosen: list[int] = []
    for i in [0, len(rows) - 1, *range(1, len(rows) - 1)]:
        if len(chosen) >= MAX_LABELS or i in chosen:
            continue
        if all(math.dist(pts[i], pts[j]) >= MIN_GAP for j in chosen):
            chosen.append(i)
    return sorted(chosen)


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
    log = bool(f["hours"].min() > 0 and f["cost"].min() > 0)  # type: ignore[operator]
    if "config" in f.columns:
        rows = f.select("hours", "cost", "config").rows()
        for i in _spread(rows, log):
            h, c, name = rows[i]
            ax.annotate(str(name), (h, c), fontsize=7, xytext=(4, 3), textcoords="offset points")
    if log:
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
