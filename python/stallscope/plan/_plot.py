"""The what-if plot (report layer: analysis functions return frames; this draws one). matplotlib
is optional and imported only here."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from stallscope.plan._errors import PlanError


def plot_whatif(table: pl.DataFrame, path: str | Path, title: str = "") -> Path:
    """Draw the best configuration's step time per knob factor (one line per knob, log-2 factor
    axis) into ``path`` (.svg, .png or .pdf)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlanError("the what-if plot needs matplotlib: pip install matplotlib") from None
    out = Path(path)
    if out.suffix.lower() not in (".svg", ".png", ".pdf"):
        raise PlanError(f"plot file {out}: use a .svg, .png or .pdf name")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for knob in table["knob"].unique(maintain_order=True).to_list():
        part = table.filter((pl.col("knob") == knob) & pl.col("step_s").is_not_null()).sort(
            "factor"
        )
        ax.plot(part["factor"].to_list(), part["step_s"].to_list(), marker="o", label=knob)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("factor on the system's figure")
    ax.set_ylabel("best configuration's step time (s)")
    ax.set_title(title or "what-if: one figure scaled at a time")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(out)
    except OSError as e:
        raise PlanError(f"cannot write the plot {out}: {e}") from None
    finally:
        plt.close(fig)
    return out
