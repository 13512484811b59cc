"""The alpha-beta fit on synthetic sweeps with known answers, and the calibration file."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import polars as pl
import pytest

from stallscope.comm import Calibration, fit_frame, fit_linear, results_frame, write_calibration
from stallscope.comm import _formulas as f

SIZES = [1 << k for k in range(10, 27)]  # 1 KiB .. 64 MiB


def test_exact_line_is_recovered() -> None:
    fit = fit_linear(SIZES, [50e-6 + n / 1.25e8 for n in SIZES])
    assert fit.intercept_s == pytest.approx(50e-6, rel=1e-6)
    assert fit.slope_s_per_byte == pytest.approx(1 / 1.25e8, rel=1e-9)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.max_rel_error < 1e-9
    assert not fit.clipped


def test_noisy_line_within_tolerance() -> None:
    rng = random.Random(7)
    ts = [(200e-6 + n / 1e9) * (1 + rng.uniform(-0.03, 0.03)) for n in SIZES]
    fit = fit_linear(SIZES, ts)
    assert 1 / fit.slope_s_per_byte == pytest.approx(1e9, rel=0.03)
    assert fit.max_rel_error < 0.06
    assert fit.r2 > 0.99


def test_relative_weighting_keeps_small_sizes_right() -> None:
    # An ordinary least-squares fit would be dominated by the largest sizes and miss the small
    # ones' latency; the relative fit must predict every point within 1 %.
    ts = [1e-3 + n / 1e8 for n in SIZES]
    ts[-1] *= 1.02  # a 2 % outlier at the largest size
    fit = fit_linear(SIZES, ts)
    pred = [fit.intercept_s + fit.slope_s_per_byte * n for n in SIZES[:-1]]
    assert max(abs(p - t) / t for p, t in zip(pred, ts[:-1], strict=True)) < 0.01


def test_negative_intercept_is_clipped_through_origin() -> None:
    ts = [n / 1e8 - 1e-4 for n in SIZES[8:]]  # a line through a negative intercept
    fit = fit_linear(SIZES[8:], ts)
    assert fit.clipped
    assert fit.intercept_s == 0.0
    assert fit.slope_s_per_byte > 0


def test_fit_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="two different sizes"):
        fit_linear([1 << 20, 1 << 20], [1e-3, 1e-3])
    with pytest.raises(ValueError, match="> 0 s"):
        fit_linear([1, 2], [1e-3, 0.0])
    with pytest.raises(ValueError, match="2 sizes but 1 times"):
        fit_linear([1, 2], [1e-3])


def _synthetic_report(alpha: float, bw: float, p: int) -> dict[str, object]:
    rows = []
    for c in f.COLLECTIVES:
        for n in SIZES:
            t = f.predict_seconds(c, n, p, alpha, 1 / bw)
            rows.append(
                {
                    "collective": c,
                    "tier": "inter_node",
                    "place": "in",
                    "group_size": p,
                    "nnodes": p,
                    "bytes": n,
                    "count": n // 4,
                    "dtype": "float32",
                    "iters": 5,
                    "time_ns": t * 1e9,
                    "time_min_ns": t * 1e9,
                    "time_max_ns": t * 1e9,
                    "algbw_Bps": f.algbw(n, t),
                    "busbw_Bps": f.busbw(c, n, t, p),
                    "block_median_ns": t * 1e9,
                    "check_error": None,
                }
            )
    return {"host": "h", "backend": "gloo", "world_size": p, "nnodes": p, "results": rows}


def test_fit_frame_recovers_alpha_and_bus_bandwidth_per_collective() -> None:
    alpha, bw, p = 30e-6, 2.5e9, 4
    fits = fit_frame(results_frame(_synthetic_report(alpha, bw, p)))
    assert sorted(fits["collective"].to_list()) == sorted(f.COLLECTIVES)
    # Only sizes >= 64 KiB are fitted.
    assert set(fits["min_bytes"].to_list()) == {64 * 1024}
    assert fits["alpha_s"].to_list() == pytest.approx([alpha] * 6, rel=1e-5)
    assert fits["bandwidth_Bps"].to_list() == pytest.approx([bw] * 6, rel=1e-6)
    assert fits["max_rel_error"].max() < 1e-6  # type: ignore[operator]


def test_fit_frame_prefers_the_per_operation_median() -> None:
    rep = _synthetic_report(0.0, 1e9, 2)
    for r in rep["results"]:  # type: ignore[attr-defined]
        r["time_ns"] *= 1.5  # the mean is hit by hiccups, the median is not
    fits = fit_frame(results_frame(rep))
    assert fits["bandwidth_Bps"][0] == pytest.approx(1e9, rel=1e-6)
    mean_fits = fit_frame(results_frame(rep), statistic="mean")
    assert mean_fits["bandwidth_Bps"][0] == pytest.approx(1e9 / 1.5, rel=1e-6)


def test_calibration_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    fits = write_calibration(path, _synthetic_report(20e-6, 1.2e8, 2))
    doc = orjson.loads(path.read_bytes())
    assert doc["format"] == "stallscope.comm.calibration"
    assert doc["version"] == 1
    assert doc["min_fit_bytes"] == 65536
    assert {"r2", "max_rel_error", "alpha_s", "beta_s_per_byte"} <= set(doc["fits"][0])
    assert len(doc["fits"]) == fits.height == 6
    cal = Calibration.load(path)
    # 16 MiB all-reduce on 2 ranks: 2 alpha + n / bw
    assert cal.seconds("all_reduce", 1 << 24, 2, "inter_node") == pytest.approx(
        40e-6 + (1 << 24) / 1.2e8, rel=1e-5
    )
    with pytest.raises(KeyError, match="no fit for all_reduce on intra_node"):
        cal.seconds("all_reduce", 1, 2, "intra_node")


def test_calibration_refuses_foreign_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_bytes(b'{"format": "something else"}')
    with pytest.raises(ValueError, match="not a stallscope calibration file"):
        Calibration.load(bad)
    with pytest.raises(ValueError, match="does not exist"):
        Calibration.load(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        Calibration.load(tmp_path / "broken.json")


def test_nothing_to_calibrate_is_an_error(tmp_path: Path) -> None:
    rep = _synthetic_report(0.0, 1e9, 2)
    rep["results"] = [r for r in rep["results"] if r["bytes"] < 65536]  # type: ignore[attr-defined,index]
    with pytest.raises(ValueError, match="nothing to calibrate"):
        write_calibration(tmp_path / "c.json", rep)
    assert results_frame({"results": []}).height == 0
    assert isinstance(results_frame(rep), pl.DataFrame)
