"""Prediction against measurement: the predicted step of other configurations, stacked by stall
category beside the measured one, and, when given, the predictor's column-by-column comparison
with a measured run (stallscope.predict's frames)."""

from __future__ import annotations

from typing import Any, cast

import polars as pl

from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, figure, table
from stallscope.report._style import CATEGORY_COLORS, MS, ms


def config_label(row: dict[str, Any]) -> str:
    """A configuration's short name from the columns it has: "4 x 2 @ 200 Gb/s", or its
    ``config`` column."""
    if row.get("config"):
        return str(row["config"])
    parts = []
    if row.get("nodes") is not None:
        per = row.get("ranks_per_node")
        parts.append(f"{row['nodes']} x {per}" if per is not None else f"{row['nodes']} nodes")
    if row.get("rate_bps"):
        parts.append(f"@ {float(row['rate_bps']) / 1e9:g} Gb/s")
    if row.get("device"):
        parts.append(str(row["device"]))
    return " ".join(parts) or "?"


def _measured_step(data: ReportData) -> dict[str, float] | None:
    """The measured run as one step: per step the mean over ranks, then the median over
    steps (each category)."""
    t = data.stall_table
    if t is None or t.height == 0:
        return None
    cols = [c for c in t.columns if c.endswith("_ns") and c not in ("start_ns", "end_ns")]
    per_step = t.group_by("step").agg(pl.col(cols).mean())
    return {c: cast(float, per_step[c].median() or 0.0) for c in cols}


def render(data: ReportData) -> str | NoData:
    from stallscope.analysis import STALL_CATEGORIES
    from stallscope.report._plot import pyplot, svg

    pred, comp = data.prediction, data.comparison
    if (pred is None or pred.height == 0) and (comp is None or comp.height == 0):
        return NoData(
            "no prediction was given (stallscope.predict's frames: predict(...) for other "
            "configurations, compare(...) against a measured run)"
        )
    parts = []
    if pred is not None and pred.height:
        import numpy as np

        rows = pred.to_dicts()
        labels = [config_label(r) for r in rows]
        bars = [{c: float(r.get(f"{c}_ns") or 0) for c in STALL_CATEGORIES} for r in rows]
        meas = _measured_step(data)
        if meas is not None:
            labels.insert(0, "measured")
            bars.insert(0, {c: meas.get(f"{c}_ns", 0.0) for c in STALL_CATEGORIES})
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(10, 1.0 + 0.4 * len(labels)))
        left = np.zeros(len(labels))
        for c in STALL_CATEGORIES:
            v = np.array([b[c] for b in bars]) / MS
            if v.any():
                ax.barh(labels, v, left=left, color=CATEGORY_COLORS[c], label=c.replace("_", " "))
                left += v
        ax.invert_yaxis()
        ax.set_xlabel("step time, ms")
        ax.legend(frameon=False, ncol=9, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0))
        parts.append(
            figure(
                svg(fig, "prediction"), "Predicted step of each configuration, by stall category."
            )
        )
        shown = [
            c
            for c in (
                "nodes",
                "ranks_per_node",
                "ranks",
                "rate_bps",
                "device",
                "strategy",
                "step_ns",
                "speedup",
            )
            if c in pred.columns
        ]
        parts.append(
            table(
                pred.select(shown) if shown else pred,
                formats={
                    "step_ns": ms,
                    "rate_bps": lambda v: f"{v / 1e9:g} Gb/s",
                    "speedup": lambda v: f"{v:.2f}x",
                },
            )
        )
    if comp is not None and comp.height:
        parts.append("<h3>Prediction against measurement</h3>")
        fmt = {c: ms for c in ("predicted_ns", "measured_ns", "error_ns") if c in comp.columns}
        pcts = {c: (lambda v: f"{v:+.1f}%") for c in comp.columns if c.endswith("_pct")}
        parts.append(table(comp, formats=fmt | pcts))
    return "".join(parts)


SECTION = Section("prediction", "Prediction against measurement", render)
