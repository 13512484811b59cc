"""Rendering of stallscope's frames for people (matplotlib, an optional dependency imported only
when a figure is drawn: ``pip install 'stallscope[report]'``, or its other name ``[plot]``).

The HTML report: one offline file (styles, script and SVG plots inline) with the run in a
sentence, stall bars per step and rank, the slowest step's timeline, collective bandwidth against
message size (and a calibration's fit), stragglers, HTA's GPU views, the categories' legend, and
sections for a prediction and a recommendation. Each section (a module of its own) takes frames
of `ReportData` and renders when they are given; the page says which sections had no data.

    import stallscope.report as sr
    data = sr.report_data(stallscope.load("runs/ddp"), calibration="cal.json")
    data.prediction = stallscope.predict.predict(...)     # optional frames of other tools
    sr.write_html(data, "report.html")

`pareto_plot` draws a recommendation's time-cost plane to an SVG or PNG file.
"""

from __future__ import annotations

import os
from pathlib import Path

from stallscope.exceptions import ReportError
from stallscope.report import (
    _bandwidth,
    _hta,
    _legend,
    _pareto,
    _prediction,
    _stalls,
    _stragglers,
    _timeline,
)
from stallscope.report._data import ReportData, RunFacts, calibration_fits, report_data
from stallscope.report._html import NoData, Section, render_page, write_page
from stallscope.report._pareto_plot import pareto_plot
from stallscope.report._summary import summary_sentence

SECTIONS: tuple[Section, ...] = (
    _stalls.SECTION,
    _timeline.SECTION,
    _bandwidth.SECTION,
    _stragglers.SECTION,
    _hta.SECTION,
    _prediction.SECTION,
    _pareto.SECTION,
    _legend.SECTION,
)
"""The page's sections, in order (the summary heads the page)."""


def render_html(data: ReportData, sections: tuple[Section, ...] = SECTIONS) -> str:
    """The report page as a string."""
    return render_page(data, sections, summary_sentence(data))


def write_html(
    data: ReportData, path: str | os.PathLike[str], sections: tuple[Section, ...] = SECTIONS
) -> Path:
    """Write the report page to `path` (folders created); returns the path."""
    return write_page(render_html(data, sections), path)


__all__ = [
    "SECTIONS",
    "NoData",
    "ReportData",
    "ReportError",
    "RunFacts",
    "Section",
    "calibration_fits",
    "pareto_plot",
    "render_html",
    "report_data",
    "summary_sentence",
    "write_html",
]
