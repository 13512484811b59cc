"""Shared helpers of the plan tests. Counting helpers check the sourced data: parameters of a
preset and the model FLOPs behind each source's MFU, following the sources' own definitions,
written out here independently of the data so that a transcription error shows as a mismatch.
Fixtures give the planner's tests a model and a system with every figure in full, so those
tests do not depend on the installed presets or device table."""

from __future__ import annotations

from typing import Any

import pytest

from stallscope.plan import Cluster, Model, ModelShape, load_model, load_system


def param_count(m: ModelShape, seq_len: int | None = None) -> float:
    """Parameters of a decoder-only transformer. Gated-FFN (Llama) models: RMSNorm, no biases,
    rotary positions, untied output projection; with experts (Mixtral, Qwen3 MoE) every layer
    holds them all and a router. Others (GPT-3, Megatron, MPT): LayerNorm and
    biases (13 h per layer, as in Narayanan et al.'s count), a learned position table of
    ``seq_len`` x hidden, the output projection tied unless the preset says otherwise."""
    h, d = m.hidden, m.head_dim
    attn = 2 * h * m.heads * d + 2 * h * m.kv_heads * d  # q and out; k and v
    if m.kv_lora_rank:  # latent attention: Q and K/V down to their ranks (and a norm) and up
        qr, kr, rope, v = m.q_lora_rank, m.kv_lora_rank, m.rope_head_dim, m.v_head_dim
        q = h * qr + qr + qr * m.heads * (d + rope) if qr else h * m.heads * (d + rope)
        kv = h * (kr + rope) + kr + kr * m.heads * (d + v)
        attn = q + kv + m.heads * v * h
    if m.experts:  # MoE layers: each expert a SwiGLU FFN, shared experts, the router; the
        # dense layers among them a SwiGLU FFN (the stated counts leave MTP modules out)
        moe = attn + m.experts * 3 * h * m.moe_ffn_hidden + h * m.experts + 2 * h
        moe += 3 * h * m.shared_ffn_hidden
        dense = len(m.dense_layers)
        body = (m.layers - dense) * moe + dense * (attn + 3 * h * m.ffn_hidden + 2 * h)
        return body + 2 * m.vocab * h + h
    if m.gated_ffn:
        per_layer = attn + 3 * h * m.ffn_hidden + 2 * h
        return m.layers * per_layer + 2 * m.vocab * h + h
    per_layer = attn + 2 * h * m.ffn_hidden + 13 * h
    embeddings = (1 if m.tied_embeddings else 2) * m.vocab * h
    return m.layers * per_layer + embeddings + (seq_len or m.seq_len) * h + 2 * h


def megatron_model_flops(m: ModelShape, global_batch: int, seq_len: int) -> float:
    """Korthikanti et al. 2022, equation 7: model FLOPs of one iteration, without recompute:
    72 B L s h^2 (1 + s / 6h + V / 12hL)."""
    b, layers, s, h, v = global_batch, m.layers, seq_len, m.hidden, m.vocab
    return 72 * b * layers * s * h * h * (1 + s / (6 * h) + v / (12 * h * layers))


def llm_foundry_flops_per_token(params: float, m: ModelShape, seq_len: int) -> float:
    """llm-foundry's MFU numerator per token (scripts/train/benchmarking): 3 x (2 x params per
    token + attention 4 L h s per token)."""
    return 3 * (2 * params + 4 * m.layers * m.hidden * seq_len)


GPT3: dict[str, Any] = {
    "name": "gpt3-175b",
    "layers": 96,
    "hidden": 12288,
    "heads": 96,
    "seq_len": 2048,
    "vocab": 51200,
    "ffn_hidden": 49152,
    "kv_heads": 96,
}
#: GPT-3's width at Llama 3.1 405B's depth (126 layers): the uneven pipeline splits' tests
DEEP: dict[str, Any] = GPT3 | {"name": "gpt3-126", "layers": 126}
#: A small dense model with a gated FFN (4 layers, width 2048, 16 heads, FFN 8192): the base of
#: the recompute and latent-attention tests
SMALL_GATED: dict[str, Any] = {
    "name": "small-gated",
    "layers": 4,
    "hidden": 2048,
    "heads": 16,
    "ffn_hidden": 8192,
    "gated_ffn": True,
    "seq_len": 4096,
    "vocab": 32000,
}
#: A small MoE in the planner's keys: 8 layers of 16 experts of 1024 (2 per token), GQA, a
#: gated FFN of 8192 for any dense layer (the shared-expert, dense-layer and MTP tests' base)
SMALL_MOE: dict[str, Any] = {
    "name": "small-moe",
    "layers": 8,
    "hidden": 2048,
    "heads": 16,
    "kv_heads": 4,
    "ffn_hidden": 8192,
    "gated_ffn": True,
    "tied_embeddings": False,
    "experts": 16,
    "top_k": 2,
    "moe_ffn_hidden": 1024,
    "seq_len": 4096,
    "vocab": 32000,
}
DGX_A100: dict[str, Any] = {
    "name": "dgx-a100-test",
    "gpu": "A100-80GB",
    "gpus_per_node": 8,
    "intra_node_GBps": 300,
    "inter_node_Gbps": 1600,
    "peak_tflops": {"bf16": 312, "fp16": 312},
    "hbm_GBps": 2039,
    "hbm_GB": 80,
    "sms": 108,
}


@pytest.fixture
def gpt3() -> Model:
    return load_model(GPT3)


@pytest.fixture
def deep() -> Model:
    return load_model(DEEP)


@pytest.fixture
def small() -> Model:
    return load_model(
        {"name": "small", "layers": 8, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000}
    )


@pytest.fixture
def a100() -> Cluster:
    return load_system(DGX_A100)
