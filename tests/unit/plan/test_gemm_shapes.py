"""Per-shape GEMM residuals of a measured table (stallscope.plan._gemm_shapes)."""

from __future__ import annotations

import json
import math

import pytest

from stallscope.plan._gemm_shapes import PRIOR_WEIGHT, ShapeTable


def flat(m: int, n: int, k: int, prec: str) -> float:
    """A model that times every GEMM at 500 TFLOP/s."""
    return 2.0 * m * n * k / 500e12


def row(m: int, n: int, k: int, tflops: float, dtype: str = "bf16") -> dict[str, object]:
    return {"m": m, "n": n, "k": k, "tflops": tflops, "dtype": dtype}


def test_a_lone_row_pulls_its_shape_towards_its_time_and_fades_with_distance() -> None:
    t = ShapeTable.of([row(4096, 4096, 4096, 250.0)], flat, "test")  # twice the model's time
    at = t.ratio(4096, 4096, 4096, "bf16")
    # one row at distance 0 against the neutral prior: exp(ln 2 x 1 / (1 + w0))
    assert at == pytest.approx(math.exp(math.log(2) / (1 + PRIOR_WEIGHT)))
    one = t.ratio(8192, 4096, 4096, "bf16")  # an octave away in m
    far = t.ratio(4096 * 64, 4096, 4096, "bf16")  # six octaves: the model alone
    assert at > one > far
    assert far == 1.0
    assert t.ratio(4096, 4096, 4096, "fp8") == 1.0  # no fp8 rows
    assert t.ratio(4096, 4096, 4096, "fp16") == at  # fp16 reads bf16's rows


def test_neighbours_average_in_log_space() -> None:
    rows = [row(4096, 4096, 4096, 250.0), row(4096, 4096, 4096, 1000.0)]  # 2x and 0.5x
    assert ShapeTable.of(rows, flat, "test").ratio(4096, 4096, 4096, "bf16") == pytest.approx(1)


def test_the_measured_table_corrects_short_inner_dimensions() -> None:
    """On the shipped H200 table the attention projection under TP 8 (k = h / 8) runs below
    the one-line fit, fp8 more so; the corrected model follows those rows."""
    from stallscope.plan import _cluster, load_system

    path = _cluster._TABLES / "H200.json"
    if not path.exists():
        pytest.skip("no measured H200 table shipped with this checkout")
    d = load_system("dgx-h200").device
    assert d.gemm_shapes is not None
    rows = [r for r in json.loads(path.read_text())["gemm"] if r["what"] == "proj tp8"]
    for prec, slower in (("bf16", 1.0), ("fp8", 1.1)):
        big = [r for r in rows if r["dtype"] == prec and r["n"] >= 8192]
        assert big
        for r in big:
            measured = 2 * r["m"] * r["n"] * r["k"] / (r["tflops"] * 1e12)
            assert d.gemm_shapes.ratio(r["m"], r["n"], r["k"], prec) > slower
            assert d.gemm_s(r["m"], r["n"], r["k"], prec) == pytest.approx(measured, rel=0.15)
    # carried over to the H100 SXM with the rest of the table
    h100 = load_system("dgx-h100").device.gemm_shapes
    assert h100 is not None and h100.rows == d.gemm_shapes.rows


def test_public_shape_tables_keep_the_fit_alone(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stallscope.plan import _cluster, load_system

    monkeypatch.setattr(_cluster, "_TABLES", tmp_path)  # no measured table shipped
    assert load_system("dgx-h100").device.gemm_shapes is None
