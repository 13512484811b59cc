"""A GPU timed by its MAMF alone runs its GEMMs at the measured table's ratio of its layer-shape
fit to its own MAMF (plan/data/efficiency.json typical_gemm): the ratio comes from the shipped
table, applies only where no table or shape table times the GPU, and vanishes without it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import stallscope.plan._cluster as cluster
from stallscope.plan import load_system
from stallscope.plan._cluster import build_device, typical_over_best
from stallscope.plan._gemm import efficiency_defaults


@pytest.fixture
def no_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The package without its measured table: every GPU by its MAMF alone."""
    typical_over_best.cache_clear()
    monkeypatch.setattr(cluster, "_shipped_table", lambda gpu: None)
    yield
    typical_over_best.cache_clear()


def _mamf(gpu: str) -> dict[str, float]:
    d = build_device(gpu, {}, "test")
    fixed = float(efficiency_defaults()["gemm_fixed_us"]["value"]) * 1e-6
    return {p: f for p, (f, _) in cluster._mamf_fractions(d.name, d.peak_tflops, fixed).items()}


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
    gb200 = build_device("GB200", {}, "test")
    assert gb200.fraction("fp8") == pytest.approx(_mamf("GB200")["fp8"] * ratios["fp8"])
    # the H100 keeps its die's measured table, a given fraction stands as given
    h100 = load_system("dgx-h100").device
    assert (
        h100.matmul_fractions["bf16"] == build_device("H200-SXM", {}, "t").matmul_fractions["bf16"]
    )
    assert "typical_gemm" not in h100.basis["matmul"]
    assert build_device("A100-SXM4-80GB", {"matmul_fraction": 0.7}, "test").matmul_fraction == 0.7
    # a GPU with no MAMF row takes the default (a MAMF's fraction) times the bf16 ratio
    default = float(efficiency_defaults()["matmul_tflops"]["default_fraction"])
    l4 = build_device("L4", {}, "test")
    assert l4.matmul_fraction == pytest.approx(default * ratios["bf16"])


def test_without_the_table_the_mamf_stands(no_table: None) -> None:
    assert typical_over_best() == ()
    a100 = build_device("A100-SXM4-80GB", {}, "test")
    assert a100.matmul_fraction == pytest.approx(_mamf("A100-SXM4-80GB")["bf16"])
    assert "typical_gemm" not in a100.basis["matmul"]
