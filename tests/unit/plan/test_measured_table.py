"""A measured efficiency table: its attention rows by shape and kernel, its copy rate beyond the
cache, its sustained-clock factor, and a table of one GPU carried over to another of the same
die."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from stallscope.plan import PlanError, load_system
from stallscope.plan._cluster import carried_over
from stallscope.plan._measured_attention import curves, rates, sdpa_kernel

H100 = {"gpu": "H100-SXM", "gpus_per_node": 8, "intra_node_GBps": 450, "inter_node_Gbps": 3200}


def _attention_rows() -> list[dict[str, Any]]:
    rows = []
    for seq, f, b in ((1024, 400.0, 300.0), (4096, 600.0, 500.0)):
        for causal in (True, False):
            rows.append(
                {"batch": 2, "heads": 16, "seq": seq, "head_dim": 128, "causal": causal}
                | {"dtype": "bf16", "fwd_tflops": f - 100 * causal, "bwd_tflops": b}
            )
    return rows


def test_sdpa_runs_cudnn_on_hopper_from_torch_2_9() -> None:
    assert sdpa_kernel("2.11.0+cu130", "H200-SXM") == "cudnn"
    assert sdpa_kernel("2.9.0", "H100-SXM") == "cudnn"
    assert sdpa_kernel("2.5.1+cu124", "H100-SXM") == "flash2"
    assert sdpa_kernel("2.11.0", "A100-SXM4-80GB") == "flash2"
    assert sdpa_kernel(None, "H100-SXM") == "flash2"


def test_measured_attention_interpolates_in_log_sequence() -> None:
    c = curves(_attention_rows())
    assert rates(c, 128, 2048, False) == pytest.approx((500e12, 400e12))  # halfway in log2
    assert rates(c, 128, 2048, True) == pytest.approx((400e12, 400e12))
    assert rates(c, 64, 16384, False) == pytest.approx((600e12, 500e12))  # clamped, nearest
    assert rates({}, 128, 2048, True) is None


def test_a_measured_table_times_the_kernel_it_measured() -> None:
    table = {"versions": {"torch": "2.11.0"}, "attention": _attention_rows()}
    d = load_system(H100 | {"efficiency_table": table}).device
    assert d.attention_measured == "cudnn"
    flops = 4 * 2 * 16 * 2048**2 * 128 * 0.5
    fwd, bwd = d.attention_s(2, 16, 2048, 128, True, "bf16", kernel="cudnn")
    assert fwd == pytest.approx(flops / 400e12 + d.gemm_fixed_s)
    assert bwd == pytest.approx(2.5 * flops / 400e12 + 2 * d.gemm_fixed_s)
    fa2 = d.attention_s(2, 16, 2048, 128, True, "bf16", kernel="flash2")  # the published table
    assert fa2[0] > 1.2 * fwd
    old = load_system(H100 | {"efficiency_table": table | {"versions": {"torch": "2.5.1"}}})
    assert old.device.attention_measured == "flash2"


def test_the_copy_rate_is_the_largest_copies() -> None:
    memory = [
        {"op": "copy", "bytes": 16 << 20, "GBps": 3300.0},  # inside the 50 MB L2
        {"op": "copy", "bytes": 1 << 30, "GBps": 2900.0},
        {"op": "add", "bytes": 1 << 30, "GBps": 2700.0},
    ]
    d = load_system(H100 | {"efficiency_table": {"memory": memory}}).device
    assert d.hbm_fraction == pytest.approx(2900 / 3350)
    assert "2900 GB/s of 3350" in d.basis["hbm"]


def test_a_table_of_the_same_die_carries_over() -> None:
    h200 = load_system("dgx-h200").device
    h100 = load_system("dgx-h100").device
    if not h200.attention_measured:
        pytest.skip("no measured H200 table shipped with this checkout")
    fp8 = h100.matmul_fractions["fp8"] / h200.matmul_fractions["fp8"]
    same = {p: f for p, f in h100.matmul_fractions.items() if p != "fp8"}
    assert same == {p: f for p, f in h200.matmul_fractions.items() if p != "fp8"}
    assert fp8 < 1.0  # fp8: their MAMF ratio (below)
    assert h100.hbm_fraction == h200.hbm_fraction  # of each GPU's own bandwidth
    assert h100.layer_factor == h200.layer_factor  # fitted on the GPU it was measured on
    assert h100.attention_curves == h200.attention_curves  # equal bf16 peaks
    assert "carried over to H100-SXM" in h100.basis["matmul"]
    assert "stallscope/predict/data/efficiency/H200.json" in h100.basis["layer"]
    n = 1 << 30
    assert h100.memory_s(n) - h100.gemm_fixed_s == pytest.approx(
        (h200.memory_s(n) - h200.gemm_fixed_s) * 4800 / 3350
    )
    gemm = (8192, 8192, 8192, "bf16")
    assert h100.gemm_s(*gemm) == pytest.approx(h200.gemm_s(*gemm))


def _gemm_rows() -> list[dict[str, Any]]:
    return [
        {"m": n, "n": n, "k": n, "dtype": "bf16", "tflops": 600.0 + n / 100} for n in (2048, 8192)
    ]


def test_a_sustained_clock_slows_the_compute_not_the_memory() -> None:
    table = {"versions": {"torch": "2.11.0"}, "gemm": _gemm_rows(), "attention": _attention_rows()}
    hot = {"gemm_hot_over_cold": 1.08, "heat_s": 75, "date": "2026-01-01"}
    cold = load_system(H100 | {"efficiency_table": table}).device
    warm = load_system(H100 | {"efficiency_table": table | {"sustained": hot}}).device
    assert cold.sustained == 1.0 and warm.sustained == 1.08
    gemm = (8192, 4096, 4096, "bf16")
    assert warm.gemm_s(*gemm) == pytest.approx(1.08 * cold.gemm_s(*gemm))
    att = (2, 16, 4096, 128, True, "bf16", "cudnn")
    assert warm.attention_s(*att) == pytest.approx(tuple(1.08 * t for t in cold.attention_s(*att)))
    assert warm.memory_s(1 << 30) == cold.memory_s(1 << 30)  # the probes time GEMMs only
    assert "1.080x slower after 75 s" in warm.basis["sustained"]


@pytest.mark.parametrize("value", [0.5, 2.0, "1.1", None])
def test_an_implausible_sustained_factor_is_refused(value: object) -> None:
    table = {"gemm": _gemm_rows(), "sustained": {"gemm_hot_over_cold": value}}
    with pytest.raises(PlanError, match=r"sustained\.gemm_hot_over_cold .*remove the sustained"):
        load_system(H100 | {"efficiency_table": table})


def test_the_sustained_factor_carries_over_with_the_table() -> None:
    h200 = load_system({**H100, "gpu": "H200-SXM"}).device
    h100 = load_system(H100).device
    src = replace(h200, sustained=1.05)
    assert carried_over(src, h100).sustained == 1.05


def test_a_carried_over_table_scales_by_the_two_gpus_mamf_fractions() -> None:
    # The MAMF table times fp8 on both H100 and H200 (1402.6 and 1453.4 TFLOP/s at their best
    # shapes) and bf16 only on H100, which H200 shares as its die's: the H100 keeps the H200's
    # bf16 fit and takes fp8 at the ratio of the two best shapes' fractions.
    h200 = load_system({**H100, "gpu": "H200-SXM"}).device
    h100 = load_system(H100).device
    ratio = h100.matmul_fractions["fp8"] / h200.matmul_fractions["fp8"]
    assert ratio == pytest.approx(0.965, abs=0.005)
    assert h100.matmul_fractions["bf16"] == h200.matmul_fractions["bf16"]
    assert h100.matmul_fraction == h200.matmul_fraction
    assert "x 0.965 (fp8) (MAMF fractions H100-SXM / H200-SXM)" in h100.basis["matmul"]
    # a GPU carried over onto itself, or without entries of its own, is unscaled
    same = carried_over(h200, h200)
    assert same.matmul_fractions == h200.matmul_fractions
