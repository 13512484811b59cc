"""NVFP4: its GEMM kernels and casts against measured ones, the GPUs that run it, what it keeps
for the backward and gathers under sequence parallelism, and the peak its MFU is taken on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stallscope.plan import Model, PlanError, Strategy, load_system, predict_strategy
from stallscope.plan._costs import costs
from stallscope.plan._fp8 import block_gemm_factor, cast_bytes, fp8_casts
from stallscope.plan._layer import GEMM_PARTS
from stallscope.plan._memory import layer_activation_bytes

TE = {"preset": "nemo-25", "fp8_params": False, "tp_overlap": False}
S = Strategy(tp=4, pp=8, dp=1, micro_batch=1, global_batch=8, sequence_parallel=True, stack=TE)
CURRENT = S.with_(precision="fp8", stack=TE | {"fp8_recipe": "current"})
NVFP4 = S.with_(precision="nvfp4")
KERNELS = 3.764 / 6.812  # TE's per-layer kernel times on a B300: NVFP4 over per-tensor FP8
QUANTIZE = 2.689 / 1.823  # and the casts the autocast mode adds: NVFP4 over MXFP8


def test_gemms_run_at_the_measured_ratio_to_per_tensor_fp8(gpt3: Model) -> None:
    for name in ("gb200-nvl72", "gb300-nvl72"):
        system = load_system(name)
        cur, nv = costs(gpt3, CURRENT, system), costs(gpt3, NVFP4, system)
        assert cur.layer is not None and nv.layer is not None
        cf, nf = dict(cur.layer.f_parts), dict(nv.layer.f_parts)
        cb, nb = dict(cur.layer.b_parts), dict(nv.layer.b_parts)
        for part in GEMM_PARTS:
            assert nf[part] == pytest.approx(cf[part] * KERNELS)
            assert nb[part] == pytest.approx(cb[part] * KERNELS)
        # attention stays in 16 bit: the same kernel either way
        assert nf["attention"] == pytest.approx(cf["attention"])


def test_gemms_never_run_past_the_fp4_peak() -> None:
    gb200 = load_system("gb200-nvl72")
    assert block_gemm_factor(NVFP4, gb200) == pytest.approx(KERNELS)  # fp4 = 2x fp8 here
    peaks = dict(gb200.device.peak_tflops) | {"fp4": 1.5 * gb200.device.peak_tflops["fp8"]}
    slow = replace(gb200, device=replace(gb200.device, peak_tflops=peaks))
    assert block_gemm_factor(NVFP4, slow) == pytest.approx(1 / 1.5)  # the peaks' ratio binds


def test_casts_cost_the_measured_ratio_to_mxfp8_with_current_scalings_tensors(
    gpt3: Model,
) -> None:
    gb200 = load_system("gb200-nvl72")
    mx = S.with_(precision="fp8", stack=TE | {"fp8_recipe": "mxfp8"})
    assert cast_bytes(NVFP4, gb200) == pytest.approx(cast_bytes(mx, gb200) * QUANTIZE)
    tokens = S.micro_batch * gpt3.seq_len
    nv_f, nv_b = fp8_casts(gpt3, NVFP4, gb200, tokens)
    cur_f, cur_b = fp8_casts(gpt3, CURRENT, gb200, tokens)
    fixed = gb200.device.gemm_fixed_s
    # the same tensors as current scaling (the activation's output too), each two kernels
    per_nv, per_cur = cast_bytes(NVFP4, gb200), cast_bytes(CURRENT, gb200) + 2
    assert (nv_f - 8 * fixed) / (cur_f - 4 * fixed) == pytest.approx(per_nv / per_cur)
    assert (nv_b - 8 * fixed) / (cur_b - 4 * fixed) == pytest.approx(per_nv / per_cur)
    bf16 = costs(gpt3, S, gb200)
    assert bf16.layer is not None and dict(bf16.layer.f_parts)["fp8_cast"] == 0.0
    assert costs(gpt3, NVFP4, gb200).weight_cast_layer > 0  # once per step, 2D-scaled


def test_saved_inputs_and_gathered_inputs_are_nvfp4(gpt3: Model) -> None:
    gb200 = load_system("gb200-nvl72")
    acts = {p: layer_activation_bytes(gpt3, S.with_(precision=p)) for p in ("bf16", "fp8")}
    nv = layer_activation_bytes(gpt3, NVFP4)
    sb, h = gpt3.seq_len, gpt3.hidden
    # four GEMM inputs kept (QKV, projection, FFN up and down): 1 byte per value -> 0.5625
    per_value = (acts["bf16"] - acts["fp8"]) / (2 - 1)
    assert acts["fp8"] - nv == pytest.approx(per_value * (1 - 0.5625))
    assert per_value > 2 * sb * h / S.tp  # more than the norms' outputs alone
    tp = {p: costs(gpt3, S.with_(precision=p), gb200).f_tp for p in ("bf16", "fp8")}
    nv_tp = costs(gpt3, NVFP4, gb200).f_tp
    assert nv_tp < tp["fp8"] < tp["bf16"]  # the all-gathers quantized, the reduce-scatters not


def test_needs_blackwell_and_its_mfu_is_on_the_fp4_peak(gpt3: Model) -> None:
    with pytest.raises(PlanError, match=r"'nvfp4' needs block-scaled.*H100-SXM has none"):
        predict_strategy(gpt3, load_system("dgx-h100"), NVFP4)
    gb300 = load_system("gb300-nvl72")
    p = predict_strategy(gpt3, gb300, NVFP4)
    peak = gb300.device.peak_tflops["fp4"] * 1e12
    assert p.mfu == pytest.approx(p.model_flops / (p.step_ns * 1e-9 * NVFP4.gpus * peak))
    assert p.step_ns < predict_strategy(gpt3, gb300, CURRENT).step_ns
    with pytest.raises(PlanError, match=r"precision 'fp4' is not one of .*nvfp4"):
        predict_strategy(gpt3, gb300, S.with_(precision="fp4"))
