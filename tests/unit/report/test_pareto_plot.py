"""The time-cost plot: SVG and PNG files with the front and the recommended configuration, and
clear errors for a file type it cannot write or a frame without the columns it needs."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from stallscope.report import ReportError, pareto_plot


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "config": ["a x 1", "a x 2", "b x 1", "a x 1 + b x 1"],
            "market": ["on-demand", "on-demand", "spot", "on-demand"],
            "hours": [10.0, 5.5, 12.0, 7.0],
            "cost": [100.0, 110.0, 40.0, 120.0],
            "pareto": [True, True, True, False],
            "mix": [False, False, False, True],
        }
    )


def test_svg_and_png(tmp_path: Path) -> None:
    svg = pareto_plot(_frame(), tmp_path / "front.svg", title="my job", time_budget_hours=8)
    text = svg.read_text()
    assert text.startswith("<?xml") and "<svg" in text
    for label in (
        "Pareto front",
        "recommended: a x 1 (on-demand)",
        "my job",
        "spot (expected)",
        "time budget",
    ):
        assert label in text
    assert "cost budget" not in text
    text = pareto_plot(_frame(), tmp_path / "cost.svg", cost_budget=105).read_text()
    assert "cost budget" in text and "time budget" not in text
    png = pareto_plot(_frame(), tmp_path / "front.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_requests(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"front\.jpg: a plot is written as \.svg or \.png"):
        pareto_plot(_frame(), tmp_path / "front.jpg")
    with pytest.raises(ReportError, match="the frame lacks pareto, mix"):
        pareto_plot(_frame().drop("pareto", "mix"), tmp_path / "f.svg")
    with pytest.raises(ReportError, match="no configuration to draw"):
        pareto_plot(_frame().head(0), tmp_path / "f.svg")
