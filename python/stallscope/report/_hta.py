"""HolisticTraceAnalysis' views of a GPU timeline (stallscope.analysis' HTA-identical functions):
GPU time per rank split into compute, non-compute and idle, idle time by cause, kernel time by
type."""

from __future__ import annotations

import polars as pl

from stallscope.analysis.hta._idle import idle_by_cause
from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, figure, table
from stallscope.report._style import SERIES_COLORS, ms

_SPLIT = (("compute_pct", "compute"), ("non_compute_pct", "non-compute"), ("idle_pct", "idle"))


def render(data: ReportData) -> str | NoData:
    from stallscope.report._plot import pyplot, svg

    views = data.hta
    if views is None or views["temporal_breakdown"].height == 0:
        return NoData("no GPU kernels in this run (the HTA views need a CUDA trace)")
    temporal = views["temporal_breakdown"].sort("rank")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.35 * temporal.height))
    left = [0.0] * temporal.height
    y = list(range(temporal.height))
    for (col, label), color in zip(
        _SPLIT, (SERIES_COLORS[2], SERIES_COLORS[1], "#bbbbbb"), strict=True
    ):
        v = temporal[col].fill_nan(0).to_list()
        ax.barh(y, v, left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, v, strict=True)]
    ax.set_yticks(y, [f"rank {r}" for r in temporal["rank"].to_list()])
    ax.invert_yaxis()
    ax.set_xlabel("% of the GPU's span (first kernel start to last kernel end)")
    ax.legend(frameon=False, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    parts = [figure(svg(fig, "hta"), "HTA's temporal breakdown per rank.")]
    overlap = views["comm_comp_overlap"]
    per_rank = temporal.join(overlap.select("rank", "overlap_pct"), on="rank", how="left").select(
        "rank",
        "kernel_time_ns",
        "compute_pct",
        "non_compute_pct",
        "idle_pct",
        pl.col("overlap_pct").fill_nan(None),
    )
    parts.append(
        table(
            per_rank,
            formats={"kernel_time_ns": ms}
            | {c: (lambda v: f"{v:.1f}") for c, _ in _SPLIT}
            | {"overlap_pct": lambda v: f"{v:.1f}"},
            labels={
                "kernel_time_ns": "GPU span",
                "compute_pct": "compute %",
                "non_compute_pct": "non-compute %",
                "idle_pct": "idle %",
                "overlap_pct": "comm overlapped %",
            },
        )
    )
    idle = views["idle_time_breakdown"]
    if idle.height:
        wide = idle_by_cause(idle)
        parts.append("<h3>GPU idle time by cause (ms)</h3>")
        parts.append(table(wide, formats={c: (lambda v: f"{v:.3f}") for c in wide.columns[2:]}))
    types = views["kernel_type_breakdown"]
    if types.height:
        parts.append("<h3>Kernel time by type (all ranks)</h3>")
        parts.append(
            table(
                types.select("kernel_type", "time_ns", "percentage"),
                formats={"time_ns": ms, "percentage": lambda v: f"{v:.1f}"},
                labels={"kernel_type": "kernel type", "time_ns": "time", "percentage": "%"},
            )
        )
    return "".join(parts)


SECTION = Section("hta", "GPU timeline (HTA's views)", render)
