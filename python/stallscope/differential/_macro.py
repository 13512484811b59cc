"""The macroscopic model (Stash): how the number of layers and the bytes of gradients drive the
communication stall. A linear fit per link rate,

    communication stall = a + b x layers + c x gradient bytes,

by least squares on the points not held out, with its error on the held-out points (and in
sample)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from stallscope.exceptions import AnalyzeError

POINT_COLUMNS: Final = ("rate", "layers", "gradient_bytes", "comm_stall_ns", "held_out")


@dataclass(frozen=True)
class Fit:
    """``coefficients``: per rate, intercept_ns, ns_per_layer, ns_per_byte, the fit points'
    count and R^2, the held-out points' count, mean absolute percentage error and worst absolute
    error (ns); ``predictions``: every point with its fitted stall, error_ns (fitted minus
    measured) and error_pct."""

    coefficients: pl.DataFrame
    predictions: pl.DataFrame


def _mape(err: np.ndarray, y: np.ndarray) -> float | None:
    ok = np.abs(y) > 0
    return float(np.mean(np.abs(err[ok] / y[ok])) * 100) if ok.any() else None


def fit_layers_gradients(points: pl.DataFrame) -> Fit:
    """Fit each rate's points (POINT_COLUMNS: rate, layers, gradient_bytes, comm_stall_ns,
    held_out) on the rows not held out. Needs 3 fit points per rate whose layers and bytes vary
    independently (AnalyzeError otherwise)."""
    missing = [c for c in POINT_COLUMNS if c not in points.columns]
    if missing:
        raise AnalyzeError(f"the sweep's points lack column(s) {missing}; need {POINT_COLUMNS}")
    coefs = []
    preds = []
    for (rate,), g in points.sort("rate", "layers", "gradient_bytes").group_by(
        "rate", maintain_order=True
    ):
        x = np.column_stack(
            [np.ones(g.height), g["layers"].to_numpy(), g["gradient_bytes"].to_numpy()]
        ).astype(np.float64)
        y = g["comm_stall_ns"].to_numpy().astype(np.float64)
        held = g["held_out"].to_numpy().astype(bool)
        fit = ~held
        if fit.sum() < 3:
            raise AnalyzeError(
                f"rate {rate}: {int(fit.sum())} fit point(s); the fit of 3 coefficients needs "
                "at least 3 (hold fewer points out)"
            )
        if np.linalg.matrix_rank(x[fit]) < 3:
            raise AnalyzeError(
                f"rate {rate}: the fit points' layers and gradient bytes do not vary "
                "independently; add models that change one without the other"
            )
        beta, *_ = np.linalg.lstsq(x[fit], y[fit], rcond=None)
        yhat = x @ beta
        err = yhat - y
        ss_res = float(np.sum(err[fit] ** 2))
        ss_tot = float(np.sum((y[fit] - y[fit].mean()) ** 2))
        coefs.append(
            {
                "rate": rate,
                "intercept_ns": float(beta[0]),
                "ns_per_layer": float(beta[1]),
                "ns_per_byte": float(beta[2]),
                "fit_points": int(fit.sum()),
                "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else None,
                "fit_mape_pct": _mape(err[fit], y[fit]),
                "held_out_points": int(held.sum()),
                "held_out_mape_pct": _mape(err[held], y[held]) if held.any() else None,
                "held_out_max_abs_error_ns": float(np.max(np.abs(err[held])))
                if held.any()
                else None,
            }
        )
        preds.append(
            g.with_columns(
                fitted_ns=pl.Series(yhat),
                error_ns=pl.Series(err),
                error_pct=pl.Series(np.where(y != 0, 100 * err / np.where(y != 0, y, 1), np.nan)),
            )
        )
    return Fit(pl.DataFrame(coefs), pl.concat(preds, how="diagonal_relaxed"))
