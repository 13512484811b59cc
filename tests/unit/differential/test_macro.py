"""The layers-and-gradients fit: exact on a linear law, errors on held-out points, bad input."""

from __future__ import annotations

import polars as pl
import pytest

from stallscope.differential import fit_layers_gradients
from stallscope.exceptions import AnalyzeError


def points(
    rate: str, law: tuple[float, float, float], held: set[int] = frozenset()
) -> pl.DataFrame:  # type: ignore[assignment]
    sizes = [(2, 1e6), (4, 1e6), (2, 4e6), (8, 2e6), (16, 3e6), (6, 8e6)]
    a, b, c = law
    return pl.DataFrame(
        {
            "rate": [rate] * len(sizes),
            "layers": [s[0] for s in sizes],
            "gradient_bytes": [int(s[1]) for s in sizes],
            "comm_stall_ns": [a + b * s[0] + c * s[1] for s in sizes],
            "held_out": [i in held for i in range(len(sizes))],
        }
    )


def test_recovers_a_linear_law_per_rate_and_predicts_held_out_points() -> None:
    df = pl.concat(
        [points("1gbit", (1e6, 2e5, 8.0), {1, 4}), points("200mbit", (3e6, 1e5, 40.0), {0})]
    )
    fit = fit_layers_gradients(df)
    c = {r["rate"]: r for r in fit.coefficients.iter_rows(named=True)}
    assert c["1gbit"]["intercept_ns"] == pytest.approx(1e6, rel=1e-6)
    assert c["1gbit"]["ns_per_layer"] == pytest.approx(2e5, rel=1e-6)
    assert c["1gbit"]["ns_per_byte"] == pytest.approx(8.0, rel=1e-6)
    assert c["200mbit"]["ns_per_byte"] == pytest.approx(40.0, rel=1e-6)
    assert (c["1gbit"]["fit_points"], c["1gbit"]["held_out_points"]) == (4, 2)
    assert c["1gbit"]["r2"] == pytest.approx(1.0)
    assert c["1gbit"]["held_out_mape_pct"] == pytest.approx(0.0, abs=1e-6)
    assert fit.predictions.height == 12
    assert fit.predictions["error_ns"].abs().max() < 1.0  # type: ignore[operator]


def test_noise_shows_in_the_held_out_error() -> None:
    df = points("1gbit", (1e6, 2e5, 8.0), {5}).with_columns(
        pl.when(pl.col("layers") == 6)
        .then(pl.col("comm_stall_ns") * 1.2)
        .otherwise(pl.col("comm_stall_ns"))
    )
    (c,) = fit_layers_gradients(df).coefficients.to_dicts()
    assert c["held_out_mape_pct"] == pytest.approx(100 * (1 - 1 / 1.2), rel=1e-6)
    truth = 1e6 + 2e5 * 6 + 8.0 * 8e6
    assert c["held_out_max_abs_error_ns"] == pytest.approx(0.2 * truth, rel=1e-6)


def test_too_few_or_collinear_points_and_missing_columns() -> None:
    with pytest.raises(AnalyzeError, match=r"2 fit point\(s\); .* at least 3"):
        fit_layers_gradients(points("1gbit", (0, 1, 1), {0, 1, 2, 3}))
    collinear = points("1gbit", (0, 1, 1)).with_columns(gradient_bytes=pl.col("layers") * 1000)
    with pytest.raises(AnalyzeError, match="do not vary independently"):
        fit_layers_gradients(collinear)
    with pytest.raises(AnalyzeError, match=r"lack column\(s\) \['held_out'\]"):
        fit_layers_gradients(points("x", (0, 1, 1)).drop("held_out"))
