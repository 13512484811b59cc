"""Drawing with matplotlib (an optional dependency, the `report` extra, imported when a plot is
drawn): figures rendered to SVG text that the page inlines, with no external reference."""

from __future__ import annotations

import io
import re
from typing import Any

from stallscope.exceptions import ReportError

_PREAMBLE = re.compile(r"^.*?(?=<svg)", re.S)  # the XML declaration and the DOCTYPE
_IDS = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')  # an id, or a reference to one


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display), with the report's defaults."""
    try:
        import matplotlib
    except ImportError:
        raise ReportError(
            "the HTML report draws its plots with matplotlib, which is not installed: "
            'pip install "stallscope[report]" (or pip install matplotlib)'
        ) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",  # text stays text: smaller files, the page's font
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "figure.dpi": 96,
        }
    )
    return plt


def svg(fig: Any, key: str) -> str:
    """The figure as inline SVG (closed afterwards). SVGs inlined in one page share its id
    space: every id of the figure, and every reference to one, gets the prefix `key` (unique in
    the page), so that no clip path names another figure's."""
    import matplotlib

    plt = pyplot()
    buf = io.StringIO()
    try:
        with matplotlib.rc_context({"svg.hashsalt": "stallscope"}):  # the same SVG every time
            fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    finally:
        plt.close(fig)
    text = _PREAMBLE.sub("", buf.getvalue(), count=1).strip()
    return _IDS.sub(lambda m: f"{m.group(1)}{key}-{m.group(2)}", text)


def integer_ticks() -> Any:
    """A tick locator for axes of whole numbers (ranks, steps)."""
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)
