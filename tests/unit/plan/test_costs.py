"""FLOPs against Megatron's formula; compute, communication and recompute costs move the way
the model says."""

from __future__ import annotations

import pytest

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
    assert full.b_tp == pytest.approx(2 * c1.b_tp)
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
