"""The stall categories: each one's colour and what it means (analysis.STALL_MEANINGS, the one
definition the CLI and the docs show too)."""

from __future__ import annotations

from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, esc
from stallscope.report._style import CATEGORY_COLORS


def render(data: ReportData) -> str | NoData:
    from stallscope.analysis import STALL_MEANINGS

    items = "".join(
        f'<li><span class="swatch" style="background:{CATEGORY_COLORS[c]}"></span>'
        f"<b>{esc(c.replace('_', ' '))}</b>: {esc(meaning)}</li>"
        for c, meaning in STALL_MEANINGS.items()
    )
    return (
        '<p class="lead">Every instant of a step goes to the first category that applies, in '
        "this order; the categories of a step add up to its time.</p>"
        f'<ul class="legend">{items}</ul>'
    )


SECTION = Section("legend", "What the categories mean", render)
