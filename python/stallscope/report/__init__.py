"""Rendering of stallscope's frames for people: figures (matplotlib, an optional dependency
imported only when a figure is drawn: ``pip install 'stallscope[plot]'``)."""

from __future__ import annotations

from stallscope.report._pareto_plot import ReportError, pareto_plot

__all__ = ["ReportError", "pareto_plot"]
