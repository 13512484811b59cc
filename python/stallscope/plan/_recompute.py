"""What activation recompute rebuilds in the backward, and what torchtitan's per-op policy keeps.

``RECOMPUTE`` are the modes; ``RECOMPUTE_MODULES`` selective recompute's modules: Megatron-Core's
``--recompute-modules`` and torchtitan's per-op policy ``ops``.

torchtitan's per-op selective checkpointing (``activation_checkpoint.mode = "selective"``,
``selective_ac_option = "op"``, its default for Llama; torchtitan/models/llama3/
parallelize_llama.py at e7c0cae, 2025-06-11, the same rule in torchtitan/distributed/
activation_checkpoint.py at b5bcd76, 2026-08-21) keeps, of each transformer block, the outputs
of its matmuls, its attention kernel, its reduce-scatters and its amax reductions, and
recomputes everything else in the backward. Of the matmuls it counts the block's calls in order
and recomputes every second one. A Llama block calls wq, wk, wv, wo, then the FFN's w1, w3 and
w2, so wk, wo and w3 are recomputed (an ungated FFN: wk, wo and w2), with the norms, the rotary
embedding, the activation, the residual adds and the FP8 casts. The planner times that as the
K share of its fused QKV GEMM, the projection, half the gated FFN-up GEMM (the ungated FFN-down
GEMM) and the layer's element-wise work and casts. An MoE block's routed experts run as grouped
matmuls, which the policy does not keep: they are recomputed whole, with the token permutation;
its shared experts (after the router's matmul, the fifth) lose w1 and w2 of a gated FFN.
Latent attention's projections count as a fused QKV GEMM's.
"""

from __future__ import annotations

from typing import Final

from stallscope.plan._model import Model

RECOMPUTE: Final = ("none", "selective", "full")
#: Selective recompute's modules and what each drops from the activations kept for the
#: backward and recomputes there: Megatron-Core's ``--recompute-modules`` (its default:
#: core_attn) and torchtitan's per-op policy.
RECOMPUTE_MODULES: Final = {
    "core_attn": "the attention core (the s x s scores of unfused attention)",
    "layernorm": "the norms' outputs (the QKV and FFN inputs)",
    "mla_up_proj": "latent attention's up-projections (Q, K and V)",
    "mlp": "a dense FFN's inside (its activation's input and output)",
    "moe_act": "the routed experts' activation output",
    "moe": "the routed experts and their token dispatch",
    "shared_experts": "the shared experts' inside",
    "ops": (
        "torchtitan's per-op policy: every second matmul of a block, the routed experts, "
        "the norms, activations, rotary embedding and casts"
    ),
}
#: Modules that are whole policies of their own, never combined with others.
WHOLE_POLICIES: Final = frozenset({"ops"})


def ops_gemm_shares(model: Model) -> tuple[float, float, float]:
    """Under the per-op policy, the recomputed share of a dense layer's forward QKV GEMM, of its
    FFN-up GEMM and of its FFN-down GEMM (the projection is recomputed whole)."""
    kv = model.kv_hidden / (model.q_hidden + 2 * model.kv_hidden)  # wk of wq, wk, wv
    if model.gated_ffn:  # w1 kept, w3 recomputed, w2 kept
        return kv, 0.5, 0.0
    return kv, 0.0, 1.0  # w1 kept, w2 recomputed


def ops_shared_share(model: Model) -> float:
    """Under the per-op policy, the recomputed share of an MoE layer's shared experts' forward
    GEMMs: after the router's matmul (the fifth, kept), w1 and w2 of a gated FFN (w3 kept;
    1/3 + 1/3 of its FLOPs), w1 of an ungated one (half)."""
    return 2 / 3 if model.gated_ffn else 0.5


def ops_activation_bytes(model: Model, sb: int, t: int, sp: int, compiled: bool = False) -> float:
    """What one layer keeps for one micro-batch on one GPU under the per-op policy, bytes: the
    block's input, the kept matmuls' 16-bit outputs (Q and V, the gated FFN's w1 and w2, the
    ungated one's w1; the FFN-down output before its reduction), the attention output with its
    fp32 log-sum-exp, and under tensor parallelism the two reduce-scatters' outputs. ``sb`` is
    the tokens this GPU holds, ``t`` the tensor-parallel size, ``sp`` t with sequence
    parallelism, else 1. ``compiled``: under torch.compile the policy keeps only what the
    backward reads, so not the outputs that feed the residual sums alone (the FFN-down's and
    the reduce-scatters'); eager checkpointing caches every listed output
    (``bench/activation_memory.py``)."""
    h = model.hidden
    kept = 2 * sb * h / sp  # the block's input
    kept += 2 * sb * (model.q_hidden + model.kv_hidden + model.o_hidden) / t  # Q, V, attention
    kept += 4 * model.heads * sb / t  # the attention's log-sum-exp
    if t > 1 and not compiled:
        kept += 2 * 2 * sb * h / t  # the projection's and the FFN-down's reduce-scatters
    if model.moe:  # the router's logits; the routed experts are recomputed
        kept += 2 * sb * model.experts / sp
        if model.shared_ffn_hidden and model.gated_ffn:  # the shared experts keep w3
            kept += 2 * sb * model.shared_ffn_hidden / t
        elif model.shared_ffn_hidden and not compiled:  # or w2's partial sum
            kept += 2 * sb * h
        return kept
    kept += 2 * sb * model.ffn_hidden / t  # w1's output
    if model.gated_ffn and not compiled:
        kept += 2 * sb * h  # w2's output, each rank's partial sum before the reduction
    return kept
