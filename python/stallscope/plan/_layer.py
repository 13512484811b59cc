"""What one transformer layer's compute costs one GPU for one micro-batch, part by part.

Per layer under tensor parallelism t (Megatron's column / row split), T = micro-batch x seq_len /
cp tokens, GEMMs (m x k) @ (k x n):

* ``gemm_qkv`` (T, h, (q + 2 kv_h) / t) with q = heads x head_dim (h unless the model says);
  ``gemm_proj`` (T, q / t, h); ``gemm_fc1`` (T, h, f / t, twice with a gated FFN); ``gemm_fc2``
  (T, f / t, h). Backward: the data gradient and the weight gradient of each, the same FLOPs
  each (m, n, k permuted).
* Mixture of experts: ``gemm_fc1`` and ``gemm_fc2`` are the grouped GEMMs of this GPU's
  experts (experts / ep of them, each FFN split over etp), each expert taking an equal share
  of the routed token copies (``_strategy.ffn_rows_width``; balanced routing, as the published
  MoE benchmarks force, unless ``Strategy.moe_load`` gives the busiest GPU's excess);
  ``router`` the h x experts GEMM in 16 bit with its softmax and top-k; ``moe_permute`` the memory-bound gather of each token copy into expert order and back
  (weighted by its routing probability). Shared experts (``Model.shared_ffn_hidden``) add a
  dense FFN of that width over every token, split over tp, to ``gemm_fc1`` and ``gemm_fc2``.
* ``attention``: the stack's fused kernel at its published rate (``_attention``; slower with
  dropout, ``dropout_rates``), or the unfused batched GEMMs plus the s x s softmax, mask and
  dropout as memory-bound kernels.
* ``elementwise``: two norms, two residual adds (with dropout), the FFN activation; per-token
  work divided by t with sequence parallelism; backward moves twice the bytes.
* ``fp8_cast`` (FP8 only): the casts of GEMM inputs to FP8 that no other kernel does on the
  way (``_fp8``).
* ``recompute`` (backward only): full recompute repeats the forward; selective the attention
  core (nothing with flash attention, which recomputes it anyway).
* ``measured_gap``: what a measured layer on the device takes beyond the kernel sum
  (``_layer_fit``; zero without a measured table).
* ``slowest_gpu``: a synchronous job runs at its slowest GPU's pace; GPUs of one model differ
  in sustained matmul rate (``slowest_gpu_share``; zero on one GPU).

Every part is in seconds; ``LayerCost.forward`` and ``.backward`` sum them.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Final

from stallscope.plan._attention import dropout_rates
from stallscope.plan._cluster import Cluster
from stallscope.plan._fp8 import block_gemm_factor, fp8_casts, gemm_precision
from stallscope.plan._gemm import efficiency_defaults
from stallscope.plan._model import Model
from stallscope.plan._recompute import ops_gemm_shares, ops_shared_share
from stallscope.plan._strategy import Strategy, ffn_rows_width, fused_attention

ACT_BYTES: Final = 2  # activations travel and are stored in 16 bit
#: The router's GEMM stays in 16 bit under FP8 and NVFP4: Megatron-Core's TopKRouter is a plain
#: weight outside Transformer Engine's quantized modules (megatron/core/transformer/moe/router.py).
ROUTER_PRECISION: Final = {"fp8": "bf16", "nvfp4": "bf16"}
#: The parts of a layer, in the order the breakdown lists them.
LAYER_PARTS: Final = (
    "gemm_qkv",
    "gemm_proj",
    "gemm_fc1",
    "gemm_fc2",
    "attention",
    "elementwise",
    "router",
    "moe_permute",
    "fp8_cast",
    "recompute",
    "measured_gap",
    "slowest_gpu",
)
GEMM_PARTS: Final = ("gemm_qkv", "gemm_proj", "gemm_fc1", "gemm_fc2")


@dataclass(frozen=True)
class LayerCost:
    """Seconds of one layer's compute on one GPU for one micro-batch, by part."""

    f_parts: tuple[tuple[str, float], ...]
    b_parts: tuple[tuple[str, float], ...]

    @property
    def forward(self) -> float:
        return sum(v for _, v in self.f_parts)

    @property
    def backward(self) -> float:
        return sum(v for _, v in self.b_parts)


def gemm_fwd_bwd(system: Cluster, m: int, k: int, n: int, prec: str) -> tuple[float, float]:
    """Seconds of an (m x k) @ (k x n) GEMM forward and of its two backward GEMMs."""
    d = system.device
    return d.gemm_s(m, n, k, prec), d.gemm_s(m, k, n, prec) + d.gemm_s(k, n, m, prec)


def batched_gemm_fwd_bwd(
    system: Cluster, batch: int, m: int, k: int, n: int, prec: str
) -> tuple[float, float]:
    """Seconds of ``batch`` independent (m x k) @ (k x n) GEMMs in one strided-batched launch
    forward, and of its two backward launches. The batch joins the output rows of every
    launch: the gradient of the right operand is ``batch`` (k x n) outputs, each reduced over
    its own m rows (folding the batch into the reduction instead would leave a few k x n
    tiles to the whole GPU)."""
    d = system.device
    fwd = d.gemm_s(batch * m, n, k, prec)
    return fwd, d.gemm_s(batch * m, k, n, prec) + d.gemm_s(batch * k, n, m, prec)


def layer_cost(model: Model, s: Strategy, system: Cluster) -> LayerCost:
    """The compute of one transformer layer (see the module doc)."""
    d = system.device
    t, b, seq, h = s.tp, s.micro_batch, model.seq_len, model.hidden
    tokens = b * seq // s.cp  # context parallelism: this GPU's share of each sequence
    prec = gemm_precision(s.precision)  # NVFP4's GEMMs: FP8's rate times block_gemm_factor
    r = 1.0 / t if s.sequence_parallel else 1.0  # share of per-token work on each TP rank
    q = model.q_hidden
    rows, fw = ffn_rows_width(model, s, tokens)  # the FFN GEMMs' rows and width on this GPU
    groups = model.experts // s.ep if model.moe else 1  # GEMMs of each FFN matrix (experts)
    per_group = max(1, rows // groups)

    shapes = {
        "gemm_qkv": (tokens, h, (q + 2 * model.kv_hidden) // t, 1),
        "gemm_proj": (tokens, model.o_hidden // t, h, 1),
        "gemm_fc1": (per_group, h, (2 if model.gated_ffn else 1) * fw, groups),
        "gemm_fc2": (per_group, fw, h, groups),
    }
    fwd: dict[str, float] = {}
    bwd: dict[str, float] = {}
    mx = block_gemm_factor(s, system)  # block-scaled kernels (MXFP8, NVFP4) against per-tensor
    sw = model.shared_ffn_hidden // t  # the shared experts' width on this GPU (0: none)
    shared = {
        "gemm_fc1": (tokens, h, (2 if model.gated_ffn else 1) * sw),
        "gemm_fc2": (tokens, sw, h),
    }
    shared_f = 0.0  # the shared experts' forward GEMMs (a selective recompute module)
    for name, (m_, k_, n_, count) in shapes.items():
        g_f, g_b = gemm_fwd_bwd(system, m_, k_, n_, prec)
        fwd[name], bwd[name] = g_f * mx * count, g_b * mx * count
        if sw and name in shared:
            s_f, s_b = gemm_fwd_bwd(system, *shared[name], prec)
            fwd[name] += s_f * mx
            bwd[name] += s_b * mx
            shared_f += s_f * mx
    local = tokens // t if s.sequence_parallel else tokens  # this GPU's sequence-parallel share
    up_f = 0.0  # latent attention's up-projections, forward
    if model.mla:  # latent attention: down- and up-projections in place of one QKV GEMM
        fwd["gemm_qkv"] = bwd["gemm_qkv"] = 0.0
        for m_, k_, n_ in model.latent_gemms(tokens, local, t):
            g_f, g_b = gemm_fwd_bwd(system, m_, k_, n_, prec)
            fwd["gemm_qkv"] += g_f * mx
            bwd["gemm_qkv"] += g_b * mx
            if k_ in (model.q_lora_rank, model.kv_lora_rank) and m_ == tokens:
                up_f += g_f * mx

    heads = model.heads // t
    if fused_attention(model, s):
        kernel = s.software.attention
        att_f, att_b = d.attention_s(b, heads, seq, model.attention_head_dim, True, prec, kernel)
        # with context parallelism each GPU holds seq / cp queries against every key
        att_f, att_b = att_f / s.cp, att_b / s.cp
        if model.dropout:  # a random number per score element inside the kernel
            keep_f, keep_b = dropout_rates()
            att_f, att_b = att_f / keep_f, att_b / keep_b
        core_f = 0.0  # selective recompute has nothing left to recompute
    else:
        bh = b * heads
        qk_dim = model.head_dim + model.rope_head_dim
        qk_f, qk_b = batched_gemm_fwd_bwd(system, bh, seq, qk_dim, seq, prec)
        av_f, av_b = batched_gemm_fwd_bwd(system, bh, seq, seq, model.o_hidden // model.heads, prec)
        scores = bh * seq * seq * ACT_BYTES
        # fused scale-mask-softmax (read + write), dropout (read + write + 1-byte mask)
        soft_f = d.memory_s(2 * scores + (2 * scores + scores / 2 if model.dropout else 0), 2)
        att_f = qk_f + av_f + soft_f
        att_b = qk_b + av_b + 2 * soft_f
        core_f = att_f
    fwd["attention"], bwd["attention"] = att_f, att_b

    mask = 0.5 if model.dropout else 0.0  # a 1-byte mask per 2-byte element
    tok = tokens * h * ACT_BYTES * r
    act = (3 if model.gated_ffn else 2) * (rows * fw + tokens * sw) * ACT_BYTES
    if sw:  # the shared experts' output added to the routed experts' sum
        act += 3 * tokens * h * ACT_BYTES
    if model.mla:  # the norms of the compressed Q and K/V (read and write)
        act += 2 * local * (model.q_lora_rank + model.kv_lora_rank) * ACT_BYTES
    ew_bytes = 2 * tok + (3 + mask) * tok + 2 * tok + (3 + mask) * tok + act
    fwd["elementwise"] = d.memory_s(ew_bytes, 5)
    bwd["elementwise"] = d.memory_s(2 * ew_bytes, 10)
    fwd["router"] = bwd["router"] = fwd["moe_permute"] = bwd["moe_permute"] = 0.0
    if model.moe:
        rt_prec = ROUTER_PRECISION.get(s.precision, s.precision)
        rt_f, rt_b = gemm_fwd_bwd(system, local, h, model.experts, rt_prec)
        # fp32 logits: softmax, top-k and the auxiliary loss read and write them a few times
        logits = local * model.experts * 4
        fwd["router"] = rt_f + d.memory_s(3 * logits, 3)
        bwd["router"] = rt_b + d.memory_s(4 * logits, 3)
        # each token copy gathered into expert order (read the token, write the copy) and
        # back (read the copy, write the weighted sum); the backward moves both gradients
        copies = rows * h * ACT_BYTES
        fwd["moe_permute"] = d.memory_s(2 * (copies + tok), 2)
        bwd["moe_permute"] = d.memory_s(4 * (copies + tok), 2)
    fwd["fp8_cast"], bwd["fp8_cast"] = fp8_casts(model, s, system, tokens)

    if s.recompute == "full":
        bwd["recompute"] = sum(fwd.values())
    else:  # selective: each recomputed module's forward once more (none: nothing)
        moe, dense = model.moe, not model.moe  # a mixed model's layers come one kind each
        experts_act = d.memory_s(3 * rows * fw * ACT_BYTES, 1) if moe else 0.0
        pieces = {
            "core_attn": core_f,
            "layernorm": d.memory_s(2 * 2 * tok, 2),
            "mla_up_proj": up_f,
            "mlp": fwd["gemm_fc1"] + fwd["gemm_fc2"] + d.memory_s(act, 1) if dense else 0.0,
            "shared_experts": shared_f + d.memory_s(3 * tokens * sw * ACT_BYTES, 1) if sw else 0.0,
            "moe_act": experts_act,
            "moe": fwd["gemm_fc1"] + fwd["gemm_fc2"] - shared_f + fwd["router"]
            + fwd["moe_permute"] + experts_act if moe else 0.0,
        }  # fmt: skip
        if "ops" in s.recomputed:  # torchtitan's per-op policy (_recompute)
            qkv_r, up_r, down_r = ops_gemm_shares(model)
            pieces["ops"] = qkv_r * fwd["gemm_qkv"] + fwd["gemm_proj"] + fwd["elementwise"]
            pieces["ops"] += fwd["fp8_cast"]
            if moe:
                pieces["ops"] += pieces["moe"] + ops_shared_share(model) * shared_f
            else:
                pieces["ops"] += up_r * fwd["gemm_fc1"] + down_r * fwd["gemm_fc2"]
        bwd["recompute"] = sum(pieces[m] for m in s.recomputed)
    fwd["recompute"] = 0.0
    gap = system.device.layer_factor - 1.0  # what a measured layer adds to the kernel sum
    fwd["measured_gap"] = gap * sum(fwd.values())
    bwd["measured_gap"] = gap * sum(bwd.values())
    slow = slowest_gpu_share(s.gpus)
    fwd["slowest_gpu"] = slow * sum(fwd.values())
    bwd["slowest_gpu"] = slow * sum(bwd.values())
    return LayerCost(
        tuple((p, fwd[p]) for p in LAYER_PARTS), tuple((p, bwd[p]) for p in LAYER_PARTS)
    )


def slowest_gpu_share(gpus: int) -> float:
    """How much longer the slowest of ``gpus`` GPUs takes than the typical one (a fraction):
    the spread of sustained matmul rates across GPUs (efficiency.json ``gpu_spread``, a
    standard deviation) times the expected maximum of ``gpus`` standard normals (Blom's
    approximation). Every step of a synchronous job waits for that GPU."""
    if gpus <= 1:
        return 0.0
    sigma = float(efficiency_defaults()["gpu_spread"]["value"])
    return sigma * NormalDist().inv_cdf((gpus - 0.375) / (gpus + 0.25))
