"""Memory per GPU: weights, gradients and optimizer state under each ZeRO stage; activations per
layer (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", generalised to grouped-query attention, gated FFNs, flash attention and no dropout)
times the micro-batches a pipeline stage holds at once; the logits at the loss's peak (bytes
per logit by the stack's loss: ``Stack.loss_bytes``, ``loss_parallel_bytes``); an allowance.

Activations of one layer for one micro-batch, bytes (16-bit values, 1-byte dropout masks), with
s = seq_len, b = micro-batch, h = hidden, a = heads, t = tp:

* kept whole on every TP rank unless sequence parallel (then / t): the two norms' inputs (2sbh
  each), the QKV and FFN-up inputs (2sbh each), two dropout masks (sbh each) -> 10 sbh;
* split by t: Q, K, V (2sbh, 2sb kv_h twice), the projection's input (2sbh), the FFN
  activation's input and the FFN-down input (2sbf each; the activation input twice when gated)
  -> 24 sbh / t for GPT (f = 4h);
* the s x s attention scores (unfused attention only): softmax output 2as^2b, dropout mask
  as^2b, dropout output 2as^2b -> 5as^2b / t.

That is Korthikanti's s b h (10 + 24/t + 5as/(ht)), sbh (34 + 5as/h) at t = 1 and
sbh/t (34 + 5as/h) with sequence parallelism. FP8 training keeps each GEMM's input for the
weight gradient in FP8, one byte per value (the QKV, projection, FFN-up and FFN-down inputs;
Transformer Engine saves the quantized input of its Linear and LayerNormMLP, column-wise only,
and the FFN activation's input stays 16-bit: NVIDIA/TransformerEngine@d0067d0d, 2026-08-22,
transformer_engine/pytorch/module/linear.py and layernorm_mlp.py). Selective recompute drops
the s^2 term (``core_attn``), and with other modules (``Strategy.recompute_modules``) what
each rebuilds: the norms' outputs, latent attention's Q, K and V, a dense FFN's or the shared
experts' inside, the routed experts' activation output or all they keep but the router's;
full recompute keeps only each layer's input (2sbh, / t with sequence parallelism) and holds
one layer's activations while it recomputes. Multi-token prediction modules sit with the loss on
the last stage: their own weights (and a copy of the embedding when pp > 1), a layer's
activations each per micro-batch held, and their own logits.

Under ZeRO 3 a GPU also holds the gathered weights of the layer in use and of the one
prefetched, and the embedding and output layer gathered from the forward to the backward:
PyTorch FSDP's root module does not reshard after forward (pytorch/pytorch@005da465,
torch/distributed/_composable/fsdp/_fsdp_state.py, ``FSDPState._lazy_init``, read
2026-11-29), and the embedding and the output layer are the root's where each block is sharded
on its own (torchtitan, llm-foundry).

A mixture-of-experts layer keeps, instead of the FFN's, per GPU: the routed token copies
(the experts' FFN-up input, ``gin`` bytes), the activation's input and the FFN-down input of
each copy at the expert's width per GPU, the copies' outputs for the probability-weighted
sum (16 bit), and the router's fp32 logits and probabilities; shared experts keep what a
dense FFN of their width keeps. The experts' weights count
once per ep x etp GPUs, their gradients and optimizer state sharded over the expert
data-parallel group (``Strategy.expert_replicas``) where the dense part's shard over dp x cp.
"""

from __future__ import annotations

from dataclasses import dataclass

from stallscope.plan._fp8 import saved_input_bytes
from stallscope.plan._layer_mix import chunk_dense_layers
from stallscope.plan._model import Model
from stallscope.plan._pipeline_split import chunk_layers, stage_layers
from stallscope.plan._recompute import ops_activation_bytes
from stallscope.plan._schedule import layers_in_flight
from stallscope.plan._strategy import (
    Strategy,
    ffn_rows_width,
    fused_attention,
    gpu_layer_params,
)

GIB = 1 << 30
#: CUDA context, cuBLAS / NCCL workspaces and buffers held outside PyTorch's caching allocator.
RESERVED_BYTES = 1 * GIB
#: Caching-allocator fragmentation allowance on top of what the job holds.
FRAGMENTATION = 0.05


def layer_activation_bytes(model: Model, s: Strategy, recompute: str | None = None) -> float:
    """Activations one layer keeps for one micro-batch on one GPU, bytes."""
    rc = s.recompute if recompute is None else recompute
    # what selective recompute rebuilds: the strategy's modules, else the stack's default
    default = s.software.selective_recompute.split("+") if rc == "selective" else ()
    drop = s.recomputed if rc == s.recompute else frozenset(default)
    sb = model.seq_len // s.cp * s.micro_batch  # the tokens of a sequence this GPU holds
    h, t = model.hidden, s.tp
    sp = t if s.sequence_parallel else 1
    if rc == "full":
        return 2 * sb * h / sp
    if "ops" in drop:  # torchtitan's per-op policy
        return ops_activation_bytes(model, sb, t, sp, s.software.elementwise == "fused")
    mask = 1 if model.dropout else 0
    gin = saved_input_bytes(s.precision)  # bytes per value of a GEMM input kept for backward
    # the norms' outputs: the QKV input and the FFN-up input (the routed copies hold that,
    # unless shared experts read it too); layernorm recompute rebuilds both from their inputs
    qkv_in = 0 if "layernorm" in drop else gin
    ffn_in = 0 if model.moe and not model.shared_ffn_hidden else qkv_in
    whole = (2 + qkv_in + mask + 2 + ffn_in + mask) * sb * h
    eager = s.software.elementwise == "eager"
    if eager and "layernorm" not in drop:  # each RMSNorm keeps the fp32 copy it normalizes and
        whole += 2 * 4 * sb * h  # the 16-bit value before its weight, not its input: +4 each
    # latent attention: the compressed Q and K/V, their norms' inputs and the up-projections'
    whole += (2 + qkv_in) * sb * (model.q_lora_rank + model.kv_lora_rank)
    kv = model.kv_hidden
    q = model.q_hidden
    if s.software.gqa_repeat and not model.mla:  # K and V at the query heads' width
        kv = q
    qkv = 0 if model.mla and "mla_up_proj" in drop else 2 * q + 4 * kv
    split = (qkv + gin * model.o_hidden) * sb
    dense_ffn = model.shared_ffn_hidden if model.moe else model.ffn_hidden  # over every token
    if ("shared_experts" in drop and model.moe) or ("mlp" in drop and not model.moe):
        dense_ffn = 0  # recomputed from its input
    split += (4 if model.gated_ffn else 2) * sb * dense_ffn + gin * sb * dense_ffn
    if eager and model.gated_ffn:  # the gate's activation output, before the product
        split += 2 * sb * dense_ffn
    scores = 0.0
    flash = fused_attention(model, s)
    if not flash and "core_attn" not in drop:
        scores = (5 if model.dropout else 2) * model.heads * model.seq_len * sb
    lse = 4 * model.heads * sb if flash else 0  # fp32 log-sum-exp per row
    experts = expert_activation_bytes(model, s, gin, drop)
    return whole / sp + (split + scores + lse) / t + experts


def expert_activation_bytes(
    model: Model, s: Strategy, gin: float, drop: frozenset[str] = frozenset()
) -> float:
    """What an MoE layer's routed experts and router keep for one micro-batch on one GPU
    (less what ``drop``'s recompute modules rebuild: moe_act the FFN-down input, moe all but
    the router's output)."""
    if not model.moe:
        return 0.0
    rows, fw = ffn_rows_width(model, s, model.seq_len // s.cp * s.micro_batch)
    local = model.seq_len // s.cp * s.micro_batch // (s.tp if s.sequence_parallel else 1)
    router = 2 * 4 * local * model.experts
    if "moe" in drop:
        return router
    down_in = 0 if "moe_act" in drop else gin * fw
    per_row = gin * model.hidden + (4 if model.gated_ffn else 2) * fw + down_in
    per_row += 2 * model.hidden  # each copy's output, for the weighted sum's backward
    return rows * per_row + router


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU on the most loaded pipeline stage, by what holds them."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float
    allowance: float
    capacity: float

    @property
    def total(self) -> float:
        return (
            self.weights + self.gradients + self.optimizer + self.activations + self.logits
        ) + self.allowance

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def parts(self) -> dict[str, float]:
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "activations": self.activations,
            "logits": self.logits,
            "allowance": self.allowance,
        }

    def shortfall(self) -> str:
        """What does not fit and by how much ("" when it fits)."""
        if self.fits:
            return ""
        parts = ", ".join(f"{k} {v / GIB:.1f}" for k, v in self.parts().items() if v)
        return (
            f"needs {self.total / GIB:.1f} GiB per GPU on stage {self.stage} but the GPU has "
            f"{self.capacity / GIB:.1f} GiB: {(self.total - self.capacity) / GIB:.1f} GiB over "
            f"({parts} GiB)"
        )


def stage_params(model: Model, s: Strategy, stage: int, layers: int | None = None) -> float:
    """Parameters one GPU of ``stage`` holds before ZeRO sharding (its TP share); ``layers``:
    the stage's transformer layers where the caller has them (else ``stage_layers``)."""
    n = stage_layers(model, s)[stage] if layers is None else layers
    per = n * model.dense_layer_params() / s.tp
    emb = model.embedding_params() / s.tp
    if stage == 0:
        per += emb
    if stage == s.pp - 1 and (not model.tied_embeddings or s.pp > 1):
        per += emb  # the output layer (a tied copy lives on the last stage too)
    return per


def stage_expert_params(model: Model, s: Strategy, layers: int) -> float:
    """The routed experts' weights one GPU of a stage of ``layers`` layers holds before ZeRO
    sharding (its share of the ep x etp grid)."""
    return layers * model.expert_params() / (s.ep * s.expert_tp)


def _sharded(s: Strategy, dense: float, experts: float, nbytes: int, stage: int) -> float:
    """Bytes of ``dense`` and ``experts`` parameters at ``nbytes`` each, sharded from ZeRO
    ``stage`` on: the dense ones over dp x cp, the experts over their data-parallel group."""
    if s.zero < stage:
        return (dense + experts) * nbytes
    return dense * nbytes / s.replicas + experts * nbytes / s.expert_replicas


def memory(
    model: Model,
    s: Strategy,
    capacity_bytes: float,
    in_flight: list[int],
    every_stage: bool = False,
) -> Memory:
    """The memory of the most loaded stage; ``in_flight[k]``: the (chunk, micro-batch) forwards
    stage k holds at once (from the schedule). Only the stages that can be the most loaded are
    looked at, unless ``every_stage``."""
    best: Memory | None = None
    layers = stage_layers(model, s)
    chunks = chunk_layers(model, s)
    per_layer = layer_activation_bytes(model, s)
    recompute_one = layer_activation_bytes(model, s, "none") if s.recompute == "full" else 0.0
    # dense layers among the MoE ones (_layer_mix): each stage's count, a dense layer's share
    dense = [sum(c) for c in chunk_dense_layers(model, s)] or [0] * s.pp
    per_dense = dense_params = 0.0
    if any(dense):
        dm = model.dense_model()
        per_dense, dense_params = layer_activation_bytes(dm, s), dm.layer_params() / s.tp
    tokens = model.seq_len // s.cp * s.micro_batch
    logits = tokens * model.vocab / s.tp  # one micro-batch's, on a GPU of the last stage
    # the first and last stages hold the embedding and the logits, and (in_flight never grows
    # along the pipeline) the most activations: the others only when they hold more
    stages = {0, s.pp - 1} | {k for k, n in enumerate(in_flight) if n > in_flight[0]}
    if every_stage or s.uneven or any(dense):  # a lighter stage: any may be the most loaded
        stages = set(range(s.pp))
    for k in sorted(stages):
        moe = layers[k] - dense[k]
        p = stage_params(model, s, k, moe) + dense[k] * dense_params
        pe = stage_expert_params(model, s, moe)
        mtp = model.mtp_layers if k == s.pp - 1 else 0  # with the loss on the last stage
        ends = int(k == 0) + int(k == s.pp - 1 and (not model.tied_embeddings or s.pp > 1))
        if mtp:  # each module's own weights, and the embedding it looks the tokens up in
            own = model.mtp_params() - model.expert_params()
            p += mtp * own / s.tp + (model.embedding_params() / s.tp if s.pp > 1 else 0)
            pe += stage_expert_params(model, s, mtp)
        w = _sharded(s, p, pe, s.weight_bytes, 3)
        if s.zero >= 3:  # the gathered weights of the layer in use and the one prefetched,
            w += 2 * gpu_layer_params(model, s) * s.weight_bytes
            # and the embedding and output layer, which the fully sharded model's root gathers
            # for the forward and keeps until the backward (it does not reshard after forward)
            w += ends * model.embedding_params() / s.tp * s.weight_bytes
        gr = _sharded(s, p, pe, s.grad_bytes, 2)
        opt = _sharded(s, p, pe, s.optimizer_bytes, 1)
        held_layers = in_flight[k] * chunks[k][0]  # chunks of one stage alike
        if len(set(chunks[k])) > 1:  # a lighter chunk: the peak of its compute order's layers
            held_layers = layers_in_flight(s.pp, s.micro_batches, s.interleave, k, chunks[k])
        mean = per_layer  # of the stage's layers
        if dense[k]:
            mean = (moe * per_layer + dense[k] * per_dense) / layers[k]
        act = held_layers * mean + recompute_one  # full: one layer recomputed at a time
        act += mtp * in_flight[k] * per_layer  # each module's layer, per micro-batch held
        if k == 0:  # embedding output of each held micro-batch
            act += in_flight[k] * 2 * tokens * model.hidden / (s.tp if s.sequence_parallel else 1)
        lg = 0.0
        if k == s.pp - 1:  # the loss's peak over the logits of the micro-batch in flight,
            # with what each multi-token prediction module's loss keeps for its backward
            st = s.software
            peak = st.loss_parallel_bytes if s.tp > 1 else st.loss_bytes
            lg = (peak + model.mtp_layers * st.loss_saved_bytes) * logits
        held = w + gr + opt + act + lg
        mem = Memory(k, w, gr, opt, act, lg, RESERVED_BYTES + FRAGMENTATION * held, capacity_bytes)
        if best is None or mem.total > best.total:
            best = mem
    assert best is not None
    return best
