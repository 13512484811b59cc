"""Another device type (per kernel class, from the device table) and networks of the link
table, on the repository's H200 trace and made-up profiles."""

from __future__ import annotations

import pytest

from stallscope.predict import PredictError, Target, device, predict, prediction, profile_of
from stallscope.predict._scaling import device_ratios, phase_scales
from stallscope.predict._tiers import table_inter

from .conftest import REPO_KINETO
from .test_simulate import profile


@pytest.fixture(scope="module")
def h200():  # type: ignore[no-untyped-def]
    return profile_of(REPO_KINETO / "h200_transformer_1rank")


def test_precision_comes_from_the_matrix_kernels(h200) -> None:  # type: ignore[no-untyped-def]
    assert h200.measured.precision in ("bf16", "fp16")  # bf16 autocast: cuDNN names it f16


def test_each_kernel_class_scales_with_its_bound(h200) -> None:  # type: ignore[no-untyped-def]
    src, dst = device("H200"), device("A100-SXM4-80GB")
    prec = h200.measured.precision
    ratios = device_ratios("NVIDIA H200", "A100-SXM4-80GB", prec)
    assert ratios["matmul"] == pytest.approx(src.peak_flops(prec) / dst.peak_flops(prec))
    assert ratios["memory"] == pytest.approx(
        src.memory_bandwidth_bytes_per_s / dst.memory_bandwidth_bytes_per_s
    )
    scales = phase_scales(h200, Target(1, 1, device="A100-SXM4-80GB"))
    for ph in h200.phases:
        expect = ph.mix["matmul"] * ratios["matmul"] + ph.mix["memory"] * ratios["memory"]
        assert scales[ph.phase] == pytest.approx(expect)
    base = predict(h200, Target(1, 1)).row(0, named=True)
    a100 = predict(h200, Target(1, 1, device="A100-SXM4-80GB")).row(0, named=True)
    want = sum(ph.compute_ns * scales[ph.phase] for ph in h200.phases) + h200.backward_tail_ns
    assert a100["compute_ns"] == pytest.approx(want, rel=1e-3)
    assert a100["compute_ns"] > base["compute_ns"]  # a slower device
    assert a100["host_ns"] == pytest.approx(base["host_ns"])  # the host launches as before


def test_a_precision_the_target_lacks_runs_as_the_nearest(h200) -> None:  # type: ignore[no-untyped-def]
    # V100 has no bf16 figure: bf16 runs as fp16 (its measured 97.36 TFLOP/s); the H200 has
    # no measured bf16 rate: its peak times the default fraction
    r = device_ratios("H200", "V100-SXM2-32GB", "bf16")
    assert r["matmul"] == pytest.approx(989.5 * 0.8 / 97.36)
    # no tf32: tf32 runs as fp32 (measured 14.51 of 15.7)
    r = device_ratios("A100-SXM4-80GB", "V100-SXM2-32GB", "tf32")
    assert r["matmul"] == pytest.approx(156 * 0.8 / 14.51)


def test_matrix_kernels_move_by_measured_rates_not_peaks() -> None:
    # the 72 W L4 reaches 70.89 of its 121 TFLOP/s, the H100 SXM 794.5 of 989.5
    r = device_ratios("H100-SXM", "L4", "bf16")
    assert r["matmul"] == pytest.approx(794.5 / 70.89)
    assert r["matmul"] > 1.3 * 989.5 / 121
    # the A10G has no published peak: its measured rate stands alone
    r = device_ratios("H100-SXM", "A10G", "bf16")
    assert r["matmul"] == pytest.approx(794.5 / 69.47)
    # two GPUs without measured rates at a precision: the ratio of their peaks
    r = device_ratios("A10", "A100-SXM4-80GB", "tf32")
    assert r["matmul"] == pytest.approx(62.5 / 156)


def test_unknown_devices_name_the_nearest(h200) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PredictError, match=r"unknown target device.*nearest: H100-SXM"):
        predict(h200, Target(1, 1, device="H1OO"))
    edited = profile_of(REPO_KINETO / "h200_transformer_1rank")
    edited.measured.device = "Mystery-GPU"
    with pytest.raises(PredictError, match=r"set measured\.device in the profile"):
        predict(edited, Target(1, 1, device="H100"))


def test_networks_of_the_link_table() -> None:
    path, nic = table_inter("aws-efa-p4d")  # 4 x 100 Gbps per node of 8 GPUs
    assert nic == pytest.approx(50e9 * 0.95)  # at NCCL's efficiency on the link
    assert path.bandwidth_bytes_per_s == pytest.approx(12.5e9 * 0.95)  # one of its 4 NICs
    assert "aws-efa-p4d" in path.source and "https://" in path.source
    assert "NCCL efficiency 0.95" in path.source
    port, nic = table_inter("ib-ndr")
    assert nic is None and port.bandwidth_bytes_per_s == pytest.approx(50e9 * 0.95)
    with pytest.raises(PredictError, match="unknown network"):
        table_inter("warp-drive")
    with pytest.raises(PredictError, match="within a node, not a network"):
        table_inter("nvlink4")


def test_a_network_overrides_the_rate() -> None:
    p = profile()
    slow = predict(p, Target(2, 1, 1e9, network="ethernet-10g")).row(0, named=True)
    fast = predict(p, Target(2, 1, 1e9, network="ib-ndr")).row(0, named=True)
    assert slow["network_ns"] > fast["network_ns"]
    assert slow["network"] == "ethernet-10g"
    lines = prediction(p, [Target(2, 1, network="ib-ndr")]).links
    assert any("ib-ndr" in line for line in lines)


def _a100_job():  # type: ignore[no-untyped-def]
    p = profile()
    p.measured.device, p.measured.backend = "A100-SXM4-80GB", "nccl"
    return p


def test_a_target_may_give_its_own_links() -> None:
    p = _a100_job()
    nvlink, pcie, given_same = predict(
        p, [Target(1, 8), Target(1, 8, intra_node_GBps=32.0), Target(1, 8, intra_node_GBps=300.0)]
    ).iter_rows(named=True)
    assert pcie["interconnect_ns"] > nvlink["interconnect_ns"]  # PCIe instead of NVLink3
    assert given_same["step_ns"] == pytest.approx(nvlink["step_ns"], rel=1e-3)
    pred = prediction(p, [Target(1, 8, intra_node_GBps=32.0)])
    assert any("given: 32 GB/s" in line and "pcie4-x16" in line for line in pred.links)
    # across nodes: the node's network in Gbit/s wins over a named network's bandwidth
    efa, given_efa, given_slow = predict(
        p,
        [
            Target(2, 8, network="aws-efa-p4d"),
            Target(2, 8, inter_node_gbps=400.0),
            Target(2, 8, network="aws-efa-p4d", inter_node_gbps=100.0),
        ],
    ).iter_rows(named=True)
    assert given_efa["network_ns"] == pytest.approx(efa["network_ns"], rel=1e-3)  # 400 Gbit/s
    assert given_slow["network_ns"] > efa["network_ns"]
    with pytest.raises(PredictError, match="no link figures for ranks across nodes"):
        predict(p, Target(2, 8, intra_node_GBps=32.0))  # within a node only
    for bad in ({"intra_node_GBps": 0.0}, {"inter_node_gbps": -1.0}):
        with pytest.raises(PredictError, match="positive bandwidth"):
            Target(2, 8, **bad)  # type: ignore[arg-type]


def test_fp4_kernels_are_named_and_run_as_fp8_where_no_fp4_cores() -> None:
    from stallscope.predict._kernels import kernel_precision

    # block-scaled FP4 kernels name their E4M3 scales as well: the 4-bit values decide
    name = "cutlass3x_sm100_bstensorop_s256x256x256gemm_block_scaled_ue4m3xe2m1_ue4m3xe2m1_f32"
    assert kernel_precision(name) == "fp4"
    assert kernel_precision("nvjet_sm100_tst_e4m3_e4m3_bf16_256x128") == "fp8"
    # two GPUs with FP4 peaks and no measured FP4 rate: the ratio of their peaks
    r = device_ratios("GB200", "B200", "fp4")
    assert r["matmul"] == pytest.approx(10000 / 9000)
    # the H100 has no FP4 tensor cores: the kernels run as its FP8 ones (measured 1402.6)
    r = device_ratios("B200", "H100-SXM", "fp4")
    assert r["matmul"] == pytest.approx(9000 * 0.8 / 1402.6)
