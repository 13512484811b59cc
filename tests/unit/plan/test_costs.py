"""FLOPs against Megatron's formula; compute, communication and recompute costs move the way
the model says."""

from __future__ import annotations

from pathlib import Path

import pytest

import stallscope.plan as plan_pkg
from stallscope.plan import Cluster, Model, Strategy, load_model
from stallscope.plan._costs import costs, layer_flops, model_flops


def test_layer_flops_are_megatrons_24bsh2_plus_4bs2h(gpt3: Model) -> None:
    b, s, h = 2, gpt3.seq_len, gpt3.hidden
    assert layer_flops(gpt3, b) == 24 * b * s * h * h + 4 * b * s * s * h


def test_model_flops_are_megatrons_step_formula(gpt3: Model) -> None:
    # Narayanan et al. (SC'21) eq. 3 without recompute: 72 B s l h^2 (1 + s/(6h) + V/(12 l h))
    b, s, h, n_l, v = 1, gpt3.seq_len, gpt3.hidden, gpt3.layers, gpt3.vocab
    megatron = 72 * b * s * n_l * h * h * (1 + s / (6 * h) + v / (12 * n_l * h))
    assert model_flops(gpt3, b) == pytest.approx(megatron, rel=1e-12)


def test_gqa_and_gated_ffn_change_the_gemm_flops() -> None:
    base = {"layers": 2, "hidden": 4096, "heads": 32, "seq_len": 1024, "vocab": 1000}
    mha = load_model(base)
    gqa = load_model(base | {"kv_heads": 8, "ffn_hidden": 14336, "gated_ffn": True})
    n_tok, h = 1024, 4096
    qkv_mha, qkv_gqa = 2 * n_tok * h * 3 * h, 2 * n_tok * h * (h + 2 * 1024)
    assert layer_flops(mha, 1) - layer_flops(gqa, 1) == pytest.approx(
        qkv_mha - qkv_gqa + 2 * n_tok * h * 4 * h * 2 - 2 * n_tok * h * 14336 * 3
    )
    assert gqa.params() < mha.params() + 3 * 14336 * h * 2


def test_params_of_gpt3_175b(gpt3: Model) -> None:
    assert gpt3.params() == pytest.approx(174.6e9, rel=0.01)


def test_costs_scale_with_tp_and_recompute(gpt3: Model, a100: Cluster) -> None:
    s = Strategy(tp=8, pp=8, dp=1, micro_batch=1, global_batch=8)
    c1 = costs(gpt3, s, a100)
    c2 = costs(gpt3, s.with_(tp=4, dp=2), a100)
    assert c2.f_comp == pytest.approx(2 * c1.f_comp, rel=0.15)  # half the split, ~twice the time
    full = costs(gpt3, s.with_(recompute="full"), a100)
    assert full.b_comp == pytest.approx(c1.b_comp + c1.f_comp)
    assert full.b_tp == pytest.approx(c1.b_tp + c1.f_tp)  # the forward's collectives again
    # backward GEMMs are twice the forward's FLOPs: between 1.5x and 3x the forward time
    assert 1.5 < c1.b_comp / c1.f_comp < 3.0
    # a 1-layer forward of GPT-3 on a TP-8 A100 slice: 24 s h^2 / 8 FLOPs at <= 268 TFLOP/s
    floor = 24 * 2048 * 12288**2 / 8 / 267.9e12
    assert floor < c1.f_comp < 1.6 * floor


def test_sequence_parallel_swaps_all_reduce_for_gather_and_scatter(
    gpt3: Model, a100: Cluster
) -> None:
    s = Strategy(tp=8, pp=8, dp=1, micro_batch=1, global_batch=8)
    ar = costs(gpt3, s, a100).f_tp
    sp = costs(gpt3, s.with_(sequence_parallel=True), a100)
    assert sp.f_tp == pytest.approx(ar, rel=0.1)  # RS + AG moves what AR moves
    assert sp.f_comp < costs(gpt3, s, a100).f_comp  # norms and dropout on 1/t of the tokens


def test_context_parallel_splits_tokens_and_adds_the_ring(a100: Cluster) -> None:
    from stallscope.plan import load_model

    m = load_model({"layers": 8, "hidden": 4096, "heads": 32, "seq_len": 32768, "vocab": 32000})
    s = Strategy(tp=1, pp=1, dp=2, micro_batch=1, global_batch=2)
    one, two = costs(m, s, a100), costs(m, s.with_(cp=2, dp=1), a100)
    # half the tokens per GPU: about half the compute (the fixed costs do not halve)
    assert two.f_comp == pytest.approx(one.f_comp / 2, rel=0.05)
    assert one.f_tp == 0 and two.f_tp > 0  # K and V go round the ring
    assert two.f_tp < two.f_comp  # mostly hidden behind a 32k-token attention


def test_gemm_model_against_the_public_h100_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a measured table, XLA's H100 bf16 table (plan/data/gemm_tables.json) calibrates
    the H100's GEMMs: the model follows the table's rates and stays at the measured best (MAMF)
    for big shapes."""
    import json

    from stallscope.plan import _cluster, load_system

    monkeypatch.setattr(_cluster, "_TABLES", tmp_path)  # no measured table shipped
    for ratio in ("typical_over_best", "typical_over_public"):  # uncached: no table, no ratio
        monkeypatch.setattr(_cluster, ratio, getattr(_cluster, ratio).__wrapped__)
    d = load_system("dgx-h100").device
    doc = json.loads(
        Path(plan_pkg.__file__).with_name("data").joinpath("gemm_tables.json").read_text()
    )
    errs = []
    for r in doc["tables"][0]["rows"]:
        m = r["m"] * r["batch"]
        flops = 2 * m * r["n"] * r["k"]
        errs.append(d.gemm_s(m, r["n"], r["k"], "bf16") / (flops / (r["tflops"] * 1e12)) - 1)
    assert sum(abs(e) for e in errs) / len(errs) < 0.15
    # the biggest shapes: the MAMF measurement (794.5 TFLOP/s) bounds the model's rate
    for m, n, k in ((8192, 8192, 8192), (16384, 4096, 14336), (2048, 2048, 13312)):
        rate = 2 * m * n * k / d.gemm_s(m, n, k, "bf16")
        assert 740e12 < rate < 800e12
    # fp8: the MAMF ratio of fp8 to bf16 (1402.6 / 1979 over 794.5 / 989), below 2x bf16
    assert d.fraction("fp8") / d.fraction("bf16") == pytest.approx(
        (1402.6 / 1979) / (794.5 / 989), rel=0.02
    )
    r8 = 2 * 8192**3 / d.gemm_s(8192, 8192, 8192, "fp8")
    assert 1.6 < r8 / (2 * 8192**3 / d.gemm_s(8192, 8192, 8192, "bf16")) < 1.8


def test_gemm_model_against_a_measured_table() -> None:
    """A shipped measured table (bench/gpu_device_model.py) calibrates its GPU's GEMMs: the
    model follows the shapes a layer runs (above 0.1 TFLOP, where a step's time goes)."""
    import json

    from stallscope.plan import _cluster, load_system

    path = _cluster._TABLES / "H200.json"
    if not path.exists():
        pytest.skip("no measured H200 table shipped with this checkout")
    d = load_system("dgx-h200").device
    errs = []
    for r in json.loads(path.read_text())["gemm"]:
        flops = 2 * r["m"] * r["n"] * r["k"]
        if r["dtype"] in ("bf16", "fp8") and r["what"] != "square" and flops > 1e11:
            model = d.gemm_s(r["m"], r["n"], r["k"], r["dtype"])
            errs.append(model / (flops / (r["tflops"] * 1e12)) - 1)
    assert len(errs) > 50
    assert sum(abs(e) for e in errs) / len(errs) < 0.08
    assert abs(sum(errs) / len(errs)) < 0.04  # no bias on the shapes that count


def test_fp8_leaves_the_output_projection_in_16_bit(gpt3: Model) -> None:
    """FP8 recipes convert the transformer layers' linears only: the output GEMM and the loss
    of an FP8 step take what a bf16 step's take, while its layers get faster."""
    from stallscope.plan import load_system

    h100 = load_system("dgx-h100")
    s = Strategy(tp=4, pp=8, dp=1, micro_batch=1, global_batch=8, stack="nemo-24")
    fp8, bf16 = costs(gpt3, s.with_(precision="fp8"), h100), costs(gpt3, s, h100)
    assert fp8.logits_f == pytest.approx(bf16.logits_f)
    assert fp8.logits_b == pytest.approx(bf16.logits_b)
    assert fp8.f_comp < 0.8 * bf16.f_comp


def test_a_job_waits_for_its_slowest_gpu(gpt3: Model, a100: Cluster) -> None:
    """Every layer pays the expected lag of the job's slowest GPU: nothing on one GPU, more the
    more GPUs take part (the spread's standard deviation times the expected maximum of N
    standard normals)."""
    from statistics import NormalDist

    from stallscope.plan._gemm import efficiency_defaults
    from stallscope.plan._layer import slowest_gpu_share

    sigma = float(efficiency_defaults()["gpu_spread"]["value"])
    assert 0.005 < sigma < 0.05  # a percent or two, as measured across GPUs of one model
    assert slowest_gpu_share(1) == 0.0
    shares = [slowest_gpu_share(n) for n in (2, 8, 64, 512, 4096)]
    assert shares == sorted(shares) and shares[0] > 0
    # the expected maximum of 8 standard normals is 1.424 (order statistics' tables): Blom's
    # approximation within 1 %
    assert slowest_gpu_share(8) == pytest.approx(1.424 * sigma, rel=0.01)
    assert slowest_gpu_share(64) == pytest.approx(sigma * NormalDist().inv_cdf(63.625 / 64.25))
    one = Strategy(tp=8, pp=1, dp=1, micro_batch=1, global_batch=8)
    many = one.with_(dp=64, global_batch=512)
    c1, c64 = costs(gpt3, one, a100), costs(gpt3, many, a100)
    assert c1.layer is not None and c64.layer is not None
    f1, f64 = dict(c1.layer.f_parts), dict(c64.layer.f_parts)
    rest = sum(v for k, v in f1.items() if k != "slowest_gpu")
    assert f1["slowest_gpu"] == pytest.approx(slowest_gpu_share(8) * rest)
    assert f64["slowest_gpu"] == pytest.approx(slowest_gpu_share(512) * rest)


def test_dropout_slows_fused_attention_by_the_published_rates(gpt3: Model, a100: Cluster) -> None:
    """A fused kernel draws a random number per score element: with dropout its forward and
    backward run at attention.json's fractions of their rates, and the residual's dropout adds
    its 1-byte masks to the element-wise kernels."""
    from stallscope.plan._attention import dropout_rates
    from stallscope.plan._layer import layer_cost

    s = Strategy(tp=8, pp=1, dp=1, micro_batch=1, global_batch=8)
    dry = layer_cost(gpt3, s, a100)
    wet = layer_cost(load_model(gpt3.to_dict() | {"dropout": True}), s, a100)
    keep_f, keep_b = dropout_rates()
    assert 0.5 < keep_b < keep_f < 1.0  # the backward regenerates the mask and loses more
    f0, f1 = dict(dry.f_parts), dict(wet.f_parts)
    b0, b1 = dict(dry.b_parts), dict(wet.b_parts)
    assert f1["attention"] == pytest.approx(f0["attention"] / keep_f)
    assert b1["attention"] == pytest.approx(b0["attention"] / keep_b)
    assert f1["elementwise"] > f0["elementwise"]
    assert f1["gemm_fc1"] == f0["gemm_fc1"]


def test_batched_attention_gemms_keep_the_batch_in_the_output_rows(a100: Cluster) -> None:
    from stallscope.plan._layer import batched_gemm_fwd_bwd, gemm_fwd_bwd

    d = a100.device
    # one batch: the plain GEMM
    assert batched_gemm_fwd_bwd(a100, 1, 2048, 96, 2048, "bf16") == gemm_fwd_bwd(
        a100, 2048, 96, 2048, "bf16"
    )
    # Q K^T of 32 heads: dK is 32 outputs of 2048 x 96, each reduced over 2048 query rows:
    # as many output tiles as dQ, not the 16 of one 96 x 2048 output reduced over 65536 rows
    fwd, bwd = batched_gemm_fwd_bwd(a100, 32, 2048, 96, 2048, "bf16")
    assert fwd == d.gemm_s(32 * 2048, 2048, 96, "bf16")
    dq = d.gemm_s(32 * 2048, 96, 2048, "bf16")
    assert bwd == pytest.approx(dq + d.gemm_s(32 * 96, 2048, 2048, "bf16"))
    folded = gemm_fwd_bwd(a100, 32 * 2048, 96, 2048, "bf16")[1]
    assert bwd < 0.7 * folded
    assert bwd < 3 * dq  # the same FLOPs as dQ at a comparable rate


def test_the_optimizer_step_moves_megatrons_bytes(gpt3: Model, a100: Cluster) -> None:
    from stallscope.plan._costs import OPTIMIZER_KERNELS, optimizer_bytes

    s = Strategy(tp=8, pp=8, dp=8, micro_batch=1, global_batch=64)
    # bf16 gradients to fp32 (6), norm (4), Adam (28), master to bf16 weights (6); the
    # gradient buffer zeroed whole (2)
    assert optimizer_bytes(s, 2, 2) == (44, 2)
    assert optimizer_bytes(s.with_(precision="fp16"), 2, 2) == (52, 2)  # + unscale, inf check
    assert optimizer_bytes(s, 4, 2) == (38, 4)  # fp32 gradients used in place
    assert optimizer_bytes(s.with_(zero=3), 2, 2) == (44, 0)  # sharded gradients are freed
    # ZeRO-1 shards the step's Adam over dp, not the zeroing of the replica's gradient buffer
    lp = gpt3.dense_layer_params() / 8
    full, z1 = costs(gpt3, s, a100), costs(gpt3, s.with_(zero=1), a100)
    fixed = OPTIMIZER_KERNELS * a100.device.gemm_fixed_s
    own = [c.opt_layer - c.contention_step_layer for c in (full, z1)]  # less the overlap's
    assert own[0] == pytest.approx(a100.device.memory_s(lp * 46, OPTIMIZER_KERNELS))
    assert own[1] - fixed == pytest.approx(lp * (44 / 8 + 2) / a100.device.hbm_bytes_s)
