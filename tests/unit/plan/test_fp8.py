"""FP8 recipes: the casts each one adds, the GEMM layouts a GPU takes, MXFP8's block-scaled
kernels and the GPUs that have them."""

from __future__ import annotations

import pytest

from stallscope.plan import Model, PlanError, Strategy, load_system, predict_strategy
from stallscope.plan._costs import costs
from stallscope.plan._fp8 import block_gemm_factor, cast_bytes
from stallscope.plan._layer import GEMM_PARTS
from stallscope.plan._stack import load_stack

S = Strategy(tp=4, pp=8, dp=1, micro_batch=1, global_batch=8, precision="fp8")


def test_fp8_casts_and_weight_casts_by_stack(gpt3: Model) -> None:
    h100 = load_system("dgx-h100")
    s = Strategy(tp=4, pp=8, dp=1, micro_batch=1, global_batch=8, precision="fp8")
    te = costs(gpt3, s.with_(stack="nemo-24"), h100)
    assert te.layer is not None
    f, b = dict(te.layer.f_parts)["fp8_cast"], dict(te.layer.b_parts)["fp8_cast"]
    assert 0 < f < b  # forward: the projection's input only; backward: four output gradients
    assert te.weight_cast_layer > 0
    kept = costs(gpt3, s.with_(stack={"preset": "nemo-24", "fp8_params": True}), h100)
    assert kept.weight_cast_layer == 0 and kept.opt_layer < te.opt_layer
    dyn = costs(gpt3, s.with_(stack={"preset": "nemo-24", "fp8_recipe": "dynamic"}), h100)
    assert dyn.layer is not None and dict(dyn.layer.f_parts)["fp8_cast"] > 3 * f
    assert dyn.weight_cast_layer == pytest.approx(8 * te.weight_cast_layer)  # every micro-batch
    cur = costs(gpt3, s.with_(stack={"preset": "nemo-24", "fp8_recipe": "current"}), h100)
    assert cur.layer is not None  # activations cast as the dynamic recipe, weights once a step
    assert dict(cur.layer.f_parts)["fp8_cast"] == dict(dyn.layer.f_parts)["fp8_cast"]
    assert cur.weight_cast_layer == pytest.approx(te.weight_cast_layer)
    bf16 = costs(gpt3, s.with_(precision="bf16"), h100)
    assert bf16.layer is not None and dict(bf16.layer.f_parts)["fp8_cast"] == 0.0


def test_blackwell_casts_write_no_transpose_mxfp8_writes_both_layouts() -> None:
    h100, gb200 = load_system("dgx-h100"), load_system("gb200-nvl72")
    delayed = S.with_(stack="nemo-24")
    mx = S.with_(stack={"preset": "nemo-25", "fp8_recipe": "mxfp8"})
    assert cast_bytes(delayed, h100) == 4  # read 16 bit, write FP8 and its transpose
    assert cast_bytes(delayed, gb200) == 3  # FP8 GEMMs in any layout: one copy
    assert cast_bytes(mx, gb200) == pytest.approx(2 + 2 * (1 + 1 / 32))  # both, with scales


def test_mxfp8_runs_block_scaled_kernels_and_casts_without_an_amax_pass(gpt3: Model) -> None:
    gb200 = load_system("gb200-nvl72")
    te = {"preset": "nemo-25", "fp8_params": False}
    cur = costs(gpt3, S.with_(stack=te | {"fp8_recipe": "current"}), gb200)
    mx = costs(gpt3, S.with_(stack=te | {"fp8_recipe": "mxfp8"}), gb200)
    assert cur.layer is not None and mx.layer is not None
    cf, mf = dict(cur.layer.f_parts), dict(mx.layer.f_parts)
    cb, mb = dict(cur.layer.b_parts), dict(mx.layer.b_parts)
    ratio = 7.161 / 6.812  # TE's per-layer kernel times on a B300, MXFP8 over per-tensor
    for part in GEMM_PARTS:
        assert mf[part] == pytest.approx(cf[part] * ratio)
        assert mb[part] == pytest.approx(cb[part] * ratio)
    assert 0 < mf["fp8_cast"] < cf["fp8_cast"]  # no amax pass, the activation writes MXFP8
    assert 0 < mb["fp8_cast"] < cb["fp8_cast"]
    # the weights: once per step in both layouts, more bytes than a per-tensor copy
    assert mx.weight_cast_layer > cur.weight_cast_layer


def test_mxfp8_needs_a_gpu_with_block_scaled_tensor_cores(gpt3: Model) -> None:
    mx = S.with_(stack={"preset": "nemo-25", "fp8_recipe": "mxfp8"})
    assert block_gemm_factor(mx.with_(precision="bf16"), load_system("dgx-h100")) == 1.0
    with pytest.raises(
        PlanError, match=r"'mxfp8' needs block-scaled.*H100-SXM has none.*'current'"
    ):
        predict_strategy(gpt3, load_system("dgx-h100"), mx)
    assert load_stack({"preset": "nemo-25", "fp8_recipe": "mxfp8"}).fp8_recipe == "mxfp8"
    with pytest.raises(
        PlanError, match=r"fp8_recipe 'nvfp4' is not one of .*mxfp8.*precision 'nvfp4'"
    ):
        load_stack({"preset": "nemo-25", "fp8_recipe": "nvfp4"})
