"""What one micro-batch costs one GPU, per transformer layer and for the embedding and logits:
compute on the device model (per layer, part by part: ``_layer``), tensor-parallel
communication per layer, the pipeline's point-to-point sends, the data-parallel and ZeRO
collectives, the optimizer step.

* Communication per layer: 2 all-reduces of T x h activations forward and 2 backward, or with
  sequence parallelism 2 all-gathers + 2 reduce-scatters each way; with context parallelism
  the ring of K and V behind the attention.
* Mixture of experts (expert parallel ep > 1): the stack's token dispatcher (``_dispatch``),
  each layer's routed tokens sent to their experts' GPUs and back (twice forward, twice
  backward), with etp > 1 an all-gather of them over the expert's GPUs before
  and a reduce-scatter after; on the critical path unless the stack overlaps them
  (``Stack.ep_overlap``: behind the other pass's compute, slowing it). The experts'
  gradients are reduced and sharded over the expert data-parallel group, the rest of the
  layer's over dp x cp.
* Full recompute repeats the forward's communication in the backward.
* FP8 covers the transformer layers' linear layers only; the output projection and its loss
  stay in 16 bit (``OUTPUT_PRECISION``).
* Communication beside compute (``_overlap``): tensor-parallel collectives under the GEMMs with
  the stack's userbuffers overlap, else the column-parallel linears' backward collectives
  beside their own GEMMs (``Stack.tp_backward_overlap``), the context-parallel ring, ZeRO-3's
  gathers and scatters, the overlapped gradient and weight collectives slow the compute they
  overlap (contention).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from stallscope.plan._cluster import Cluster
from stallscope.plan._comm import collective_s, p2p_s
from stallscope.plan._dispatch import expert_dispatch_s
from stallscope.plan._fp8 import fp8_weight_casts, saved_input_bytes
from stallscope.plan._layer import (
    ACT_BYTES,
    GEMM_PARTS,
    LayerCost,
    gemm_fwd_bwd,
    layer_cost,
)
from stallscope.plan._layout import Layout, Placement, layout
from stallscope.plan._model import Model
from stallscope.plan._overlap import column_backward, slowed, tp_exposed
from stallscope.plan._strategy import Strategy

LOSS_BYTES = 4  # the cross-entropy runs on fp32 logits
#: The precision of the output projection under each training precision. FP8 and NVFP4
#: recipes convert only the transformer layers' linears: Megatron-Core builds its output layer
#: as its own ColumnParallelLinear, outside Transformer Engine's fp8_autocast modules
#: (megatron/core/models/gpt/gpt_model.py), and torchtitan converts every nn.Linear but the
#: one named "output" (torchtitan/float8.py, module_filter_fn, 2024).
OUTPUT_PRECISION = {"fp8": "bf16", "nvfp4": "bf16"}


@dataclass(frozen=True)
class Costs:
    """Seconds per micro-batch per GPU (unless said otherwise), one pipeline stage's view."""

    f_comp: float  # one layer, forward compute
    f_tp: float  # one layer, forward tensor-parallel communication
    b_comp: float  # one layer, backward compute (with recompute)
    b_tp: float  # one layer, backward tensor-parallel communication (with recompute)
    embed_f: float  # first stage: embedding lookup (+ its TP collective)
    embed_b: float
    logits_f: float  # last stage: final norm, output GEMM, loss
    logits_b: float
    send: float  # one activation (or its gradient) to the neighbouring stage
    zero_ag: float  # ZeRO-3: one layer's weights gathered (per micro-batch, per pass)
    zero_rs: float  # ZeRO-3: one layer's gradients reduce-scattered (per micro-batch)
    dp_layer: float  # ZeRO 0-2: one layer's gradient collective, once per step
    dp_embed: float  # the embedding's gradient collective (first / last stage), once per step
    tied_embed: float  # all-reduce of the tied embedding's gradient between first and last stage
    opt_layer: float  # optimizer step of one layer's shard (and its FP8 weight casts), per step
    opt_embed: float
    param_ag_layer: float  # ZeRO 1-2: one layer's updated weights all-gathered, once per step
    param_ag_embed: float
    flops_per_microbatch: float  # model FLOPs (forward + backward, no recompute), whole model
    layer: LayerCost | None = None  # the per-layer compute by part (f_comp, b_comp's parts)
    weight_cast_layer: float = 0.0  # the FP8 weight casts in opt_layer
    contention_f: float = 0.0  # in f_comp: the forward slowed by communication beside it
    contention_b: float = 0.0  # in b_comp
    contention_step_layer: float = 0.0  # in opt_layer: the step's overlapped collectives


def costs(model: Model, s: Strategy, system: Cluster, lay: Layout | None = None) -> Costs:
    lay = lay or layout(s.tp, s.pp, s.dp, system.gpus_per_node, s.cp, s.ep, s.etp)
    d = system.device
    t, b, seq, h = s.tp, s.micro_batch, model.seq_len, model.hidden
    tokens = b * seq // s.cp  # context parallelism: this GPU's share of each sequence
    prec = s.precision
    r = 1.0 / t if s.sequence_parallel else 1.0  # share of per-token work on each TP rank
    tp_group = lay.tp

    layer = layer_cost(model, s, system)
    fp, bp = dict(layer.f_parts), dict(layer.b_parts)
    st = s.software
    f_comp = layer.forward
    b_comp = layer.backward
    tok = tokens * h * ACT_BYTES * r
    act_bytes = tokens * h * ACT_BYTES
    if s.sequence_parallel:  # the gathered GEMM input travels quantized (FP8, NVFP4); the
        # reduce-scatter of the row-parallel output in 16 bit
        gathered = tokens * h * saved_input_bytes(prec)
        one_tp = collective_s(system, "all_gather", gathered, tp_group) + collective_s(
            system, "reduce_scatter", act_bytes, tp_group
        )
    else:
        one_tp = collective_s(system, "all_reduce", act_bytes, tp_group)
    # the attention's and the FFN's; shared experts gather and scatter the tokens themselves
    f_tp = b_tp = (3 if model.shared_ffn_hidden else 2) * one_tp
    if model.mla and s.sequence_parallel:  # latent attention gathers the compressed Q and K/V
        latent = model.q_lora_rank + model.kv_lora_rank + model.rope_head_dim
        if not model.q_lora_rank:  # Q comes from the hidden state: that is gathered
            latent += h
        gathered = tokens * latent * ACT_BYTES
        saved = collective_s(system, "all_gather", act_bytes, tp_group)
        saved -= collective_s(system, "all_gather", gathered, tp_group)
        f_tp -= saved
        b_tp -= saved
    cont_f = cont_b = 0.0  # compute slowed by the communication beside it (_overlap)
    if st.tp_overlap and t > 1:  # userbuffers: TP collectives under the pass's GEMMs
        gemm_f = sum(fp[k] for k in GEMM_PARTS)
        gemm_b = sum(bp[k] for k in GEMM_PARTS)
        cont_f, cont_b = slowed(f_tp, gemm_f), slowed(b_tp, gemm_b)
        f_tp, b_tp = tp_exposed(f_tp, gemm_f), tp_exposed(b_tp, gemm_b)
    elif st.tp_backward_overlap and t > 1:  # QKV's and FFN-up's collectives beside their GEMMs
        if s.sequence_parallel:
            reduce = collective_s(system, "reduce_scatter", act_bytes, tp_group)
            gather = collective_s(system, "all_gather", act_bytes, tp_group)
        else:
            reduce, gather = one_tp, 0.0
        # an MoE layer's FFN half is the token dispatcher's, not a column-parallel linear's
        linears = (bp["gemm_qkv"],) if model.moe else (bp["gemm_qkv"], bp["gemm_fc1"])
        exposed, lost = column_backward(reduce, gather, linears)
        b_tp += exposed - len(linears) * reduce  # no collective counted the re-gathers
        cont_b += lost
    if s.cp > 1:  # ring attention: K and V go round the context-parallel group, chunk by
        # chunk behind the attention compute; the first chunk and what compute cannot hide
        # are exposed (dK and dV come back the same way in the backward)
        att_f, att_b = fp["attention"], bp["attention"]
        kv = 2 * b * seq * model.kv_hidden // t * ACT_BYTES
        ring_f = collective_s(system, "all_gather", kv, lay.cp)
        f_tp += ring_f / s.cp + max(0.0, ring_f - att_f)
        b_tp += 2 * ring_f / s.cp + max(0.0, 2 * ring_f - att_b)
        cont_f += slowed(ring_f, att_f)
        cont_b += slowed(2 * ring_f, att_b)
    if model.moe and s.ep * s.expert_tp > 1:  # token copies to the experts' GPUs and back
        moe = 2 * expert_dispatch_s(model, s, system, lay, tokens)
        if st.ep_overlap:  # each pass's all-to-alls beside the other pass's compute
            cont_f += slowed(moe, b_comp)
            cont_b += slowed(moe, f_comp)
            f_tp += max(0.0, moe - b_comp)
            b_tp += max(0.0, moe - f_comp)
        else:
            f_tp += moe
            b_tp += moe
        if "moe" in s.recomputed:  # recomputing the MoE layer dispatches its tokens again
            b_tp += moe
    if s.recompute == "full":
        b_tp += f_tp
        cont_b += cont_f

    # embedding (vocab-parallel: a TP all-reduce, or reduce-scatter with sequence parallel)
    emb_coll = "reduce_scatter" if s.sequence_parallel else "all_reduce"
    embed_f = d.memory_s(2 * act_bytes, 1) + collective_s(system, emb_coll, act_bytes, tp_group)
    embed_b = d.memory_s(2 * act_bytes, 2)
    # final norm, output GEMM, vocab-parallel cross-entropy on fp32 logits
    out_prec = OUTPUT_PRECISION.get(prec, prec)
    lg_f, lg_b = gemm_fwd_bwd(system, tokens, h, model.vocab // t, out_prec)
    logit_bytes = tokens * (model.vocab // t) * LOSS_BYTES
    ce = collective_s(system, "all_reduce", 3 * tokens * LOSS_BYTES, tp_group)  # max, sum, target
    in_coll = collective_s(
        system, "all_gather" if s.sequence_parallel else "all_reduce", act_bytes, tp_group
    )
    logits_f = d.memory_s(2 * tok, 1) + lg_f + d.memory_s(3 * logit_bytes, 3) + ce
    logits_b = lg_b + d.memory_s(2 * logit_bytes + 4 * tok, 3) + in_coll
    if s.sequence_parallel:
        logits_f += collective_s(system, "all_gather", act_bytes, tp_group)

    send = p2p_s(system, act_bytes / t, lay.pp_cross_node) if s.pp > 1 else 0.0

    # data parallelism and ZeRO
    st = s.software
    lp = model.dense_layer_params() / t  # the layer's weights outside the experts
    lpe = model.expert_params() / (s.ep * s.expert_tp)  # this GPU's experts
    ep = model.embedding_params() / t
    dp, edp = lay.dp, lay.edp
    g, wb = s.grad_bytes, s.weight_bytes
    grad_coll = "all_reduce" if s.zero == 0 else "reduce_scatter"
    z3 = s.zero == 3  # fully sharded: the stack's gather and reduction widths

    def both(coll: str, width: float) -> float:  # the dense part over dp, experts over edp
        return collective_s(system, coll, lp * width, dp) + collective_s(
            system, coll, lpe * width, edp
        )

    zero_ag = both("all_gather", s.fsdp_gather_bytes) if z3 else 0.0
    zero_rs = both("reduce_scatter", st.fsdp_reduce_bytes) if z3 else 0.0
    if s.zero >= 2:  # sharded gradients (FSDP): reduced and gathered at the stack's widths
        g, wb = st.fsdp_reduce_bytes, s.fsdp_gather_bytes
    dp_layer = 0.0 if s.zero == 3 else both(grad_coll, g)
    dp_embed = collective_s(system, grad_coll, ep * g, dp)
    tied = 0.0
    if model.tied_embeddings and s.pp > 1:
        tied = collective_s(system, "all_reduce", ep * g, Placement(2, 2))
    if z3:  # each layer's weights gathered beside the layer before, gradients scattered after
        cont_f += slowed(zero_ag, f_comp)
        cont_b += slowed(zero_ag + zero_rs, b_comp)
    cont_step = 0.0  # per layer, once per step: the overlapped gradient and weight collectives
    if s.replicas > 1 and s.zero < 3 and st.dp_overlap:
        cont_step += slowed(dp_layer, b_comp)
    shard = s.replicas if s.zero >= 1 else 1
    eshard = s.expert_replicas if s.zero >= 1 else 1
    per_shard, per_local = optimizer_bytes(s, g, wb)
    kernels = OPTIMIZER_KERNELS + (1 if s.precision == "fp16" else 0)  # + the unscale
    cast = fp8_weight_casts(model, s, system, s.micro_batches)
    opt_layer = d.memory_s(
        (lp / shard + lpe / eshard) * per_shard + (lp + lpe) * per_local, kernels
    )
    opt_layer += cast
    opt_embed = d.memory_s(ep / shard * per_shard + ep * per_local, kernels)
    pag = s.zero in (1, 2)
    param_ag_layer = both("all_gather", wb) if pag else 0.0
    param_ag_embed = collective_s(system, "all_gather", ep * wb, dp) if pag else 0.0
    if pag and st.param_gather_overlap:
        # each layer's weights are gathered behind the next step's forward of the layers before
        # it: the first layer's gather is what the step waits for (one layer of the stage's;
        # under an uneven split a stage waits for its layers over the mean times one gather)
        cont_step += slowed(param_ag_layer, f_comp)
        param_ag_layer *= s.pp / model.layers
    opt_layer += cont_step
    if model.mtp_layers:
        # Multi-token prediction runs with the loss on the last stage, per micro-batch: each
        # module looks up the next tokens' embeddings, normalises both inputs, projects the
        # joined 2h wide state back to h, runs a layer of the model's kind (its compute,
        # contention and TP / all-to-all communication as a layer's), and its own output
        # layer and loss; its optimizer step is a layer's, spread over the micro-batches.
        k, m = model.mtp_layers, s.micro_batches
        pf, pb = gemm_fwd_bwd(system, tokens, 2 * h, h // t, prec)
        norms = d.memory_s(3 * 2 * tok, 3)  # three norms, each reading and writing
        mtp_f = f_comp + cont_f + f_tp + pf + norms + embed_f + logits_f
        mtp_b = b_comp + cont_b + b_tp + pb + 2 * norms + embed_b + logits_b + opt_layer / m
        logits_f += k * mtp_f
        logits_b += k * mtp_b

    return Costs(
        f_comp=f_comp + cont_f,
        f_tp=f_tp,
        b_comp=b_comp + cont_b,
        b_tp=b_tp,
        embed_f=embed_f,
        embed_b=embed_b,
        logits_f=logits_f,
        logits_b=logits_b,
        send=send,
        zero_ag=zero_ag,
        zero_rs=zero_rs,
        dp_layer=dp_layer,
        dp_embed=dp_embed,
        tied_embed=tied,
        opt_layer=opt_layer,
        opt_embed=opt_embed,
        param_ag_layer=param_ag_layer,
        param_ag_embed=param_ag_embed,
        flops_per_microbatch=model_flops(model, b),
        layer=layer,
        weight_cast_layer=cast,
        contention_f=cont_f,
        contention_b=cont_b,
        contention_step_layer=cont_step,
    )


#: Memory-bound passes of a mixed-precision optimizer step: zero the gradient buffer, gradients
#: to fp32, their norm, Adam, the weights back to 16 bit (fp16 adds a sixth, the unscale).
OPTIMIZER_KERNELS: Final = 5


def optimizer_bytes(s: Strategy, grad_bytes: int, weight_bytes: int) -> tuple[int, int]:
    """Bytes a mixed-precision Adam step moves per parameter: (per parameter of this GPU's
    optimizer shard, per parameter of its model replica), as Megatron's optimizers run it
    (megatron/core/optimizer/optimizer.py, distrib_optimizer.py; Megatron-LM of 2021-22 the same
    passes): the 16-bit gradients copied to fp32 (read 2, write 4; fp32 gradients are used in
    place), fp16's loss-scale unscale and inf check (read and write 4), the gradient norm for
    clipping (read 4), the fused Adam (read master weight, gradient, m, v; write master, m, v:
    28), the master weights written back as the layers' weights (read 4, write ``weight_bytes``);
    and once per step the data-parallel gradient buffer zeroed (``grad_bytes``), whole on every
    GPU unless ZeRO 2-3 shards the gradients (their shards are freed, not zeroed)."""
    to_fp32 = 2 + 4 if grad_bytes < 4 else 0
    unscale = 8 if s.precision == "fp16" else 0
    per_shard = to_fp32 + unscale + 4 + 28 + 4 + weight_bytes
    return per_shard, (grad_bytes if s.zero < 2 else 0)


def layer_flops(model: Model, micro_batch: int) -> float:
    """Forward FLOPs of one layer for one micro-batch (Megatron's count: every GEMM, and the
    attention's two s x s products in full, 4 b s^2 q with q = heads x head_dim); an MoE
    layer counts the top_k experts each token passes through and the router; latent attention
    its down- and up-projections and products of Q/K and V widths."""
    tokens = micro_batch * model.seq_len
    h = model.hidden
    gemm = 2 * tokens * model.attention_params()
    gemm += 2 * tokens * h * model.active_ffn_width() * model.ffn_matrices
    if model.moe:
        gemm += 2 * tokens * h * model.experts
    # Q K^T and the scores times V: q_hidden and o_hidden wide (2 x q_hidden without MLA)
    return gemm + 2 * tokens * model.seq_len * (model.q_hidden + model.o_hidden)


def model_flops(model: Model, micro_batch: int) -> float:
    """Forward + backward FLOPs of one micro-batch through the whole model (3 x forward, the
    logits and the multi-token prediction modules included, recompute excluded): the numerator
    of MFU."""
    tokens = micro_batch * model.seq_len
    dense = len(model.dense_layers)  # dense layers among MoE ones
    h = model.hidden
    one = layer_flops(model, micro_batch)
    fwd = (model.layers - dense) * one + 2 * tokens * h * model.vocab
    if dense:
        fwd += dense * layer_flops(model.dense_model(), micro_batch)
    if model.mtp_layers:  # each module's layer, its 2h x h projection and output layer
        mtp = one + 2 * tokens * 2 * h * h + 2 * tokens * h * model.vocab
        fwd += model.mtp_layers * mtp
    return 3 * fwd
