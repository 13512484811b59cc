"""A GPU timed by its MAMF alone runs its GEMMs at the measured table's ratio of its layer-shape
fit to its own MAMF, one timed by a public shape table at the measured table's ratio to its own
die's public table (plan/data/efficiency.json typical_gemm): the ratios come from the shipped
table, apply only where no measured table times the GPU, and vanish without it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import stallscope.plan._cluster as cluster
from stallscope.plan import load_system
from stallscope.plan._cluster import build_device, typical_over_best, typical_over_public
from stallscope.plan._gemm import efficiency_defaults, gemm_tables, mamf_fractions
from stallscope.predict._matmul_rates import matmul_rates


@pytest.fixture
def no_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The package without its measured table: every GPU by its MAMF alone."""
    typical_over_best.cache_clear()
    typical_over_public.cache_clear()
    monkeypatch.setattr(cluster, "_shipped_table", lambda gpu: None)
    yield
    typical_over_best.cache_clear()
    typical_over_public.cache_clear()


def _mamf(gpu: str, fixed: float | None = None) -> dict[str, float]:
    """Per precision, the GEMM fraction of ``gpu``'s MAMF (at the default fixed time)."""
    d = build_device(gpu, {}, "test")
    if fixed is None:
        fixed = float(efficiency_defaults()["gemm_fixed_us"]["value"]) * 1e-6
    return {p: f for p, (f, _) in mamf_fractions(d.name, d.peak_tflops, fixed).items()}


def test_the_ratio_is_the_table_fit_over_its_own_mamf() -> None:
    ratios = dict(typical_over_best())
    h200 = build_device("H200-SXM", {}, "test")  # its shipped table
    mamf = _mamf("H200-SXM")  # bf16 from its die's H100 row, fp8 its own
    assert set(ratios) == {"bf16", "fp8"}
    for p, r in ratios.items():
        assert r == pytest.approx(h200.matmul_fractions[p] / mamf[p])
        assert 0.5 < r < 1.0  # the table's GEMMs run below the best shape's rate


def test_only_gpus_timed_by_their_mamf_take_it() -> None:
    ratios = dict(typical_over_best())
    a100 = build_device("A100-SXM4-80GB", {}, "test")
    assert a100.matmul_fraction == pytest.approx(_mamf("A100-SXM4-80GB")["bf16"] * ratios["bf16"])
    assert "typical_gemm" in a100.basis["matmul"]
    # the H100 keeps its die's measured table, a given fraction stands as given
    h100 = load_system("dgx-h100").device
    assert (
        h100.matmul_fractions["bf16"] == build_device("H200-SXM", {}, "t").matmul_fractions["bf16"]
    )
    assert "typical_gemm" not in h100.basis["matmul"]
    assert build_device("A100-SXM4-80GB", {"matmul_fraction": 0.7}, "test").matmul_fraction == 0.7
    # a GPU with no MAMF row takes the default (a MAMF's fraction) times the bf16 ratio
    default = float(matmul_rates()["default_fraction"])
    a10 = build_device("A10", {}, "test")
    assert a10.matmul_fraction == pytest.approx(default * ratios["bf16"])


def test_without_the_table_the_mamf_stands(no_table: None) -> None:
    assert typical_over_best() == ()
    a100 = build_device("A100-SXM4-80GB", {}, "test")
    assert a100.matmul_fraction == pytest.approx(_mamf("A100-SXM4-80GB")["bf16"])
    assert "typical_gemm" not in a100.basis["matmul"]


def _public_fit(gpu: str) -> float:
    """The bf16 fraction the public shape table of ``gpu``'s family fits on ``gpu`` itself."""
    t = gemm_tables(gpu)[0]
    rows = [{"op": "gemm", "dtype": t["dtype"], **r} for r in t["rows"]]
    d = build_device(t["measured_on"], {"matmul_fraction": 0.0}, "test")
    return d.calibrated(rows, "test", shapes=False).matmul_fraction


def test_the_public_ratio_is_the_table_fit_over_its_die_public_fit() -> None:
    ratio = typical_over_public()
    h200 = build_device("H200-SXM", {}, "test")
    assert ratio == pytest.approx(h200.matmul_fractions["bf16"] / _public_fit("H100-SXM"))
    assert 0.5 < ratio < 1.0  # public tables time best kernels in short bursts


def test_gpus_timed_by_a_public_table_take_the_public_ratio() -> None:
    ratio = typical_over_public()
    assert ratio is not None
    b200 = build_device("B200", {}, "test")
    assert b200.matmul_fraction == pytest.approx(_public_fit("B200") * ratio)
    assert "typical_gemm" in b200.basis["matmul"]
    # fp8 keeps its MAMF ratio to bf16
    mamf = _mamf("B200")
    assert b200.fraction("fp8") == pytest.approx(b200.matmul_fraction * mamf["fp8"] / mamf["bf16"])
    # GB200 shares B200's die at other clocks: the fit scaled by the two MAMF fractions
    gb200 = build_device("GB200", {}, "test")
    fixed = b200.gemm_fixed_s  # the public table's fit
    scale = _mamf("GB200", fixed)["bf16"] / _mamf("B200", fixed)["bf16"]
    assert gb200.matmul_fraction == pytest.approx(b200.matmul_fraction * scale, rel=1e-6)
    assert "MAMF fractions GB200 / B200" in gb200.basis["matmul"]
    mi300 = build_device("MI300X", {}, "test")
    assert mi300.matmul_fraction == pytest.approx(_public_fit("MI300X") * ratio)


def test_without_the_table_a_public_fit_stands(no_table: None) -> None:
    assert typical_over_public() is None
    b200 = build_device("B200", {}, "test")
    assert b200.matmul_fraction == pytest.approx(_public_fit("B200"))
    assert "typical_gemm" not in b200.basis["matmul"]


def test_a_pcie_board_does_not_take_the_sxm_boards_mamf() -> None:
    from stallscope.plan._gemm import mamf_entry

    found = mamf_entry("H100-SXM", "bf16")
    assert found is not None and found[0] == "H100-SXM"
    # the H100 entry is an SXM board's (700 W); the PCIe card (350 W, 114 SMs) has its own
    found = mamf_entry("H100-PCIe", "bf16")
    assert found is not None and found[0] == "H100-PCIE"
    pcie = build_device("H100-PCIe", {}, "test")
    assert pcie.matmul_fraction < build_device("H100-SXM", {}, "test").matmul_fraction
    found = mamf_entry("A100-PCIe-80GB", "bf16")
    assert found is not None and found[0] == "A100-PCIE"


def test_blackwell_ultra_takes_the_b200_table_its_mamf_and_its_siblings_links() -> None:
    from stallscope.plan._cluster import _intra_fractions

    b200, b300 = build_device("B200", {}, "test"), build_device("B300", {}, "test")
    gb200, gb300 = build_device("GB200", {}, "test"), build_device("GB300", {}, "test")
    # B300 has a MAMF of its own: the B200 fit times the two MAMF fractions' ratio
    assert "MAMF fractions B300 / B200" in b300.basis["matmul"]
    assert 0.95 < b300.matmul_fraction / b200.matmul_fraction < 1.05
    # GB300 has none: the fit as it is, of its own peak
    assert gb300.matmul_fraction == pytest.approx(b200.matmul_fraction)
    assert gb300.peak_tflops["bf16"] == gb200.peak_tflops["bf16"] == 2500
    assert gb300.hbm_GB == b300.hbm_GB == 288
    assert _intra_fractions("B300") == _intra_fractions("B200")  # NVLink 5, NVSwitch
    assert _intra_fractions("GB300") == _intra_fractions("GB200")  # NVL72 in-switch reduction
    assert load_system("gb300-nvl72").device.name == "GB300"


def test_mi325x_takes_the_gfx942_table_at_its_mamf_ratio() -> None:
    mi300x, mi325x = build_device("MI300X", {}, "test"), build_device("MI325X", {}, "test")
    assert mi325x.peak_tflops["bf16"] == mi300x.peak_tflops["bf16"]  # the same compute dies
    assert (mi325x.hbm_GB, mi325x.hbm_GBps) == (256, 6000)
    # its MAMF (784.9 TFLOP/s at 1,000 W) over MI300X's (668.4 at 750 W), at their shapes
    assert mi325x.matmul_fraction / mi300x.matmul_fraction == pytest.approx(1.174, abs=0.01)
    assert "MAMF fractions MI325X / MI300X" in mi325x.basis["matmul"]
