"""Shared experts: a dense FFN every token passes through beside the routed experts (Qwen2-MoE,
DeepSeek, Llama 4): their shape keys, parameters, compute, communication, memory and checks."""

from __future__ import annotations

from typing import Any

import pytest

from stallscope.plan import Cluster, Model, PlanError, Strategy, load_model, predict_strategy
from stallscope.plan._comm import collective_s
from stallscope.plan._costs import costs, layer_flops
from stallscope.plan._layer import layer_cost
from stallscope.plan._layout import layout
from stallscope.plan._memory import layer_activation_bytes
from stallscope.plan._strategy import check
from tests.unit.plan.conftest import SMALL_MOE

#: Qwen2-57B-A14B's Hugging Face config.json (Qwen/Qwen2-57B-A14B): 64 experts of width 2560,
#: 8 per token, and a shared expert of width 20480 on every one of its 28 layers.
QWEN2_57B: dict[str, Any] = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "model_type": "qwen2_moe",
    "num_hidden_layers": 28,
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "intermediate_size": 18944,
    "moe_intermediate_size": 2560,
    "shared_expert_intermediate_size": 20480,
    "num_experts": 64,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "max_position_embeddings": 4096,
    "vocab_size": 151936,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}
#: A small MoE in the planner's keys, with and without a shared expert of width W.
W = 4096
MOE: dict[str, Any] = SMALL_MOE | {"name": "moe-test"}
SHARED = MOE | {"name": "shared-test", "shared_ffn_hidden": W}
#: The same layers with one dense FFN of the shared experts' width
DENSE = {k: v for k, v in MOE.items() if k not in ("experts", "top_k", "moe_ffn_hidden")} | {
    "name": "dense-test",
    "ffn_hidden": W,
}


@pytest.fixture
def moe() -> Model:
    return load_model(MOE)


@pytest.fixture
def shared() -> Model:
    return load_model(SHARED)


def test_qwen2_57b_counts_its_shared_expert() -> None:
    m = load_model(QWEN2_57B)
    assert m.shared_ffn_hidden == 20480 and m.experts == 64 and m.top_k == 8
    # the model card: 57B parameters, 14B of them active per token
    assert m.params() / 1e9 == pytest.approx(57.4, abs=0.1)
    h = m.hidden
    active = (
        m.layers * (m.attention_params() + 3 * h * m.active_ffn_width() + h * m.experts + 4 * h)
        + 2 * m.embedding_params()
    )
    assert active / 1e9 == pytest.approx(14.2, abs=0.1)


def test_deepseek_counts_its_shared_experts_in_routed_widths() -> None:
    doc = {
        "model_type": "deepseek_v2",
        "num_hidden_layers": 4,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "intermediate_size": 10944,
        "moe_intermediate_size": 1408,
        "n_routed_experts": 64,
        "num_experts": 64,
        "num_experts_per_tok": 6,
        "n_shared_experts": 2,
        "first_k_dense_replace": 0,
        "max_position_embeddings": 4096,
        "vocab_size": 102400,
        "hidden_act": "silu",
    }
    assert load_model(doc).shared_ffn_hidden == 2 * 1408


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"experts": 0, "top_k": 0, "moe_ffn_hidden": 0}, "experts is 0"),
        ({"shared_ffn_hidden": -1}, "shared_ffn_hidden must be a non-negative integer"),
    ],
)
def test_bad_shared_expert_keys_are_refused(change: dict[str, Any], words: str) -> None:
    with pytest.raises(PlanError, match=words):
        load_model(SHARED | change)


def test_shared_experts_add_a_dense_ffn(moe: Model, shared: Model, a100: Cluster) -> None:
    dense = load_model(DENSE)
    extra = 3 * moe.hidden * W  # three matrices of the gated FFN
    assert shared.params() - moe.params() == moe.layers * extra
    assert shared.dense_layer_params() - moe.dense_layer_params() == extra
    tokens = moe.seq_len
    assert layer_flops(shared, 1) - layer_flops(moe, 1) == pytest.approx(2 * tokens * extra)
    s = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, ep=8)
    with_, without = layer_cost(shared, s, a100), layer_cost(moe, s, a100)
    ref = layer_cost(dense, s.with_(ep=1), a100)
    for part in ("gemm_fc1", "gemm_fc2"):  # the routed experts' GEMMs and a dense FFN's
        want = dict(without.f_parts)[part] + dict(ref.f_parts)[part]
        assert dict(with_.f_parts)[part] == pytest.approx(want)
        want = dict(without.b_parts)[part] + dict(ref.b_parts)[part]
        assert dict(with_.b_parts)[part] == pytest.approx(want)
    assert dict(with_.f_parts)["elementwise"] > dict(without.f_parts)["elementwise"]
    p_with, p_without = (predict_strategy(m, a100, s) for m in (shared, moe))
    assert p_with.step_ns > p_without.step_ns


def test_shared_experts_gather_their_tokens_under_tensor_parallelism(
    moe: Model, shared: Model, a100: Cluster
) -> None:
    s = Strategy(tp=2, pp=1, dp=4, micro_batch=1, global_batch=8, ep=4, sequence_parallel=True)
    without, with_ = costs(moe, s, a100), costs(shared, s, a100)
    group = layout(2, 1, 4, 8).tp
    act = moe.seq_len * moe.hidden * 2  # one micro-batch's hidden states, 16 bit
    one_tp = collective_s(a100, "all_gather", act, group)
    one_tp += collective_s(a100, "reduce_scatter", act, group)
    assert one_tp > 0
    assert with_.f_tp - without.f_tp == pytest.approx(one_tp)
    assert with_.b_tp - without.b_tp == pytest.approx(one_tp)
    s1 = s.with_(tp=1, dp=8, ep=8, sequence_parallel=False)
    assert costs(shared, s1, a100).f_tp == pytest.approx(costs(moe, s1, a100).f_tp)


def test_shared_experts_keep_a_dense_ffns_activations(moe: Model, shared: Model) -> None:
    s = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, ep=8)
    sb, h = moe.seq_len, moe.hidden
    # the FFN-up input (the norm's output, 16 bit), the gated activation's two inputs and the
    # FFN-down input, each at the shared width
    want = 2 * sb * h + (4 + 2) * sb * W
    got = layer_activation_bytes(shared, s) - layer_activation_bytes(moe, s)
    assert got == pytest.approx(want)


def test_tp_must_divide_the_shared_width(a100: Cluster) -> None:
    odd = load_model(SHARED | {"kv_heads": 16, "shared_ffn_hidden": 3000})
    s = Strategy(tp=16, pp=1, dp=1, micro_batch=1, global_batch=2, sequence_parallel=True)
    with pytest.raises(PlanError, match=r"tp=16 does not divide shared_ffn_hidden \(3000\)"):
        check(odd, s, 16)
    check(odd, s.with_(tp=8, dp=2), 16)


def test_the_search_splits_the_shared_experts_evenly(a100: Cluster) -> None:
    from stallscope.plan._search import Space, search

    odd = load_model(SHARED | {"kv_heads": 16, "shared_ffn_hidden": 3004})  # 4 x 751
    res = search(odd, a100, 16, 64, 50, Space(precision="bf16", zero=(1,), interleave=(1,)))
    assert res.best and all(3004 % p.strategy.tp == 0 for p in res.best)
    assert set(res.table["tp"]) == {1, 2, 4}  # tp 8 would split it unevenly
