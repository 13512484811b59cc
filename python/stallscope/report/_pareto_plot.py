"""The time-cost plane of a recommendation: every configuration as a point (hours across, cost
up, both on log scales), the Pareto front joined by a line, the recommended one marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import polars as pl

from stallscope.exceptions import ReportError

FORMATS: Final = (".svg", ".png")
_NEEDED: Final = ("config", "market", "hours", "cost", "pareto", "mix")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ReportError(
            "drawing a plot needs matplotlib: pip install 'stallscope[plot]' (or matplotlib)"
        ) from None
    matplotlib.use("Agg")  # files only: no display is needed
    import matplotlib.pyplot as plt

    return plt


def pareto_plot(
    candidates: pl.DataFrame,
    path: str | Path,
    title: str | None = None,
    *,
    time_budget_hours: float | None = None,
    cost_budget: float | None = None,
) -> Path:
    """Draw ``candidates`` (a recommendation's candidates: config, market, hours, cost, pareto,
    mix; the first row is the recommended one) to ``path`` (.svg or .png), with the budget as a
    dashed line; returns the path."""
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise ReportError(
            f"{out}: a plot is written as {' or '.join(FORMATS)}; name the file with one of them"
        )
    missing = [c for c in _NEEDED if c not in candidates.columns]
    if missing:
        raise ReportError(f"the frame lacks {', '.join(missing)}: pass Recommendation.candidates")
    if candidates.height == 0:
        raise ReportError("no configuration to draw")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    try:
        styles = [
            ("on-demand", False, "o", "tab:blue", "on-demand"),
            ("spot", False, "^", "tab:orange", "spot (expected)"),
            ("on-demand", True, "s", "tab:green", "mix, on-demand"),
            ("spot", True, "D", "tab:red", "mix, spot (expected)"),
        ]
        for market, mix, marker, color, name in styles:
            part = candidates.filter((pl.col("market") == market) & (pl.col("mix") == mix))
            if part.height:
                ax.scatter(
                    part["hours"],
                    part["cost"],
                    s=14,
                    marker=marker,
                    color=color,
                    alpha=0.35,
                    label=name,
                    linewidths=0,
                )
        front = candidates.filter("pareto").sort("hours")
        ax.plot(
            front["hours"],
            front["cost"],
            color="black",
            linewidth=1,
            drawstyle="steps-post",
            label="Pareto front",
        )
        ax.scatter(front["hours"], front["cost"], s=18, color="black", zorder=3)
        best = candidates.row(0, named=True)
        ax.scatter(
            [best["hours"]],
            [best["cost"]],
            s=120,
            facecolors="none",
            edgecolors="crimson",
            linewidths=2,
            zorder=4,
            label=f"recommended: {best['config']} ({best['market']})",
        )
        if time_budget_hours is not None:
            ax.axvline(
                time_budget_hours, color="grey", linestyle="--", linewidth=1, label="time budget"
            )
        if cost_budget is not None:
            ax.axhline(cost_budget, color="grey", linestyle="--", linewidth=1, label="cost budget")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("time to finish the work (hours)")
        ax.set_ylabel("cost (USD)")
        ax.set_title(title or "Configurations: time against cost")
        ax.grid(True, which="both", alpha=0.2)
        ax.legend(fontsize=8, loc="upper right")
        fig.tight_layout()
        fig.savefig(out)
    finally:
        plt.close(fig)
    return out
