"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): its keys, parameters and FLOPs, its
GEMMs, the compressed gather under sequence parallelism, and DeepSeek-V3 end to end."""

from __future__ import annotations

from typing import Any

import pytest

from stallscope.plan import Cluster, Model, PlanError, Strategy, load_model, predict_strategy
from stallscope.plan._comm import collective_s
from stallscope.plan._costs import costs, layer_flops
from stallscope.plan._layer import layer_cost
from stallscope.plan._layout import layout
from stallscope.plan._search import Space, search

from .conftest import SMALL_GATED

#: DeepSeek-V3's Hugging Face config.json (deepseek-ai/DeepSeek-V3), its multi-token
#: prediction layer left out: 61 layers, the first 3 dense, 256 routed experts (8 per token)
#: and one shared expert of width 2048, latent attention with Q compressed to 1536 and K/V to
#: 512, 128 heads of 128 + 64 rotary for Q and K and 128 for V.
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_nextn_predict_layers": 0,
    "max_position_embeddings": 4096,
    "vocab_size": 129280,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}
#: A small dense model with latent attention, Q projected directly (DeepSeek-V2-Lite's way)
SMALL: dict[str, Any] = SMALL_GATED | {
    "name": "mla-test",
    "kv_lora_rank": 512,
    "rope_head_dim": 64,
    "head_dim": 128,
}


@pytest.fixture
def v3() -> Model:
    return load_model(DEEPSEEK_V3)


def test_deepseek_v3_counts_671b_of_which_37b_active(v3: Model) -> None:
    assert v3.mla and v3.dense_layers == (0, 1, 2) and v3.shared_ffn_hidden == 2048
    assert v3.q_hidden == 128 * 192 and v3.o_hidden == 128 * 128
    # the technical report: 671B parameters in total, 37B activated per token
    assert v3.params() / 1e9 == pytest.approx(671.0, abs=0.5)
    h = v3.hidden
    active = v3.moe_layers * (
        v3.attention_params() + 3 * h * v3.active_ffn_width() + h * v3.experts + 4 * h
    )
    active += 3 * v3.dense_model().layer_params() + 2 * v3.embedding_params()
    assert active / 1e9 == pytest.approx(37.5, abs=0.6)


def test_latent_attention_flops(v3: Model) -> None:
    dense = v3.dense_model()
    tokens, s = v3.seq_len, v3.seq_len
    gemms = 2 * tokens * (dense.attention_params() + 3 * dense.hidden * dense.ffn_hidden)
    # Q K^T over 192 wide heads, the scores times V over 128 wide ones, every head
    products = 2 * tokens * s * 128 * (192 + 128)
    assert layer_flops(dense, 1) == pytest.approx(gemms + products)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"kv_lora_rank": 0}, "kv_lora_rank is 0"),
        ({"kv_heads": 4}, "kv_heads \\(4\\) must equal heads \\(16\\)"),
        ({"q_lora_rank": -1}, "q_lora_rank must be a non-negative integer"),
    ],
)
def test_bad_latent_attention_keys_are_refused(change: dict[str, Any], words: str) -> None:
    with pytest.raises(PlanError, match=words):
        load_model(SMALL | change)


def test_deepseek_v3_with_its_prediction_module() -> None:
    m = load_model(DEEPSEEK_V3 | {"num_nextn_predict_layers": 1})
    assert m.mtp_layers == 1
    # the report: 671B in the main model and 14B in the MTP module (its own weights and the
    # embedding and output layer it shares: 685B on Hugging Face)
    assert m.params() / 1e9 == pytest.approx(671.0 + 11.6, abs=0.5)
    shared = 2 * m.embedding_params()
    assert (m.mtp_params() + shared) / 1e9 == pytest.approx(14.0, abs=0.6)


def test_an_unset_q_lora_rank_projects_q_directly() -> None:
    m = load_model(DEEPSEEK_V3 | {"q_lora_rank": None})
    assert m.q_lora_rank == 0
    gemms = m.latent_gemms(4096, 4096, 1)
    assert gemms[0] == (4096, 7168, 128 * 192) and len(gemms) == 3


def test_the_qkv_part_times_the_latent_gemms(a100: Cluster) -> None:
    m = load_model(SMALL)
    s = Strategy(tp=2, pp=1, dp=4, micro_batch=1, global_batch=4, sequence_parallel=True)
    tokens = m.seq_len
    d = a100.device
    part = dict(layer_cost(m, s, a100).f_parts)["gemm_qkv"]
    # the down-projections over this GPU's 2048 of the tokens, the up-projections over all
    assert part == pytest.approx(
        sum(d.gemm_s(mm, n, k, "bf16") for mm, k, n in m.latent_gemms(tokens, tokens // 2, 2))
    )


def test_sequence_parallelism_gathers_the_compressed_tokens(a100: Cluster) -> None:
    m = load_model(SMALL)
    s = Strategy(tp=2, pp=1, dp=4, micro_batch=1, global_batch=4, sequence_parallel=True)
    c = costs(m, s, a100)
    group = layout(2, 1, 4, 8).tp
    act = m.seq_len * m.hidden * 2
    ag, rs = (collective_s(a100, k, act, group) for k in ("all_gather", "reduce_scatter"))
    # the FFN's gather and scatter, the attention's scatter, and its gather of the hidden
    # state (Q from it directly) with the compressed K/V and their rotary part
    latent = collective_s(a100, "all_gather", m.seq_len * (2048 + 512 + 64) * 2, group)
    assert c.f_tp == pytest.approx(ag + 2 * rs + latent)


def test_deepseek_v3_plans_end_to_end(v3: Model) -> None:
    from stallscope.plan import load_system

    h100 = load_system("dgx-h100")
    res = search(v3, h100, 1024, 8192, 3, Space(precision="fp8", zero=(1,)))
    assert res.best and res.fitting > 0
    for p, row in zip(res.best, res.table.iter_rows(named=True), strict=True):
        assert p.step_ns == pytest.approx(row["step_s"] * 1e9, rel=1e-6)
        assert p.memory.fits
    s = Strategy(
        tp=1, pp=16, dp=64, micro_batch=1, global_batch=1024, ep=64, zero=1,
        precision="fp8", pipeline_layout="Et*3|(tttt|)*14ttL",
    )  # fmt: skip
    p = predict_strategy(v3, h100, s)
    cols = p.columns()
    assert cols["network_ns"] > cols["interconnect_ns"]  # EP 64 all-to-alls over 8 nodes
