"""One parallel configuration of a training job and its checks against a model and a GPU count.

tp x pp x cp x dp GPUs; each data-parallel replica takes ``global_batch / dp`` sequences per step in
``micro_batches = global_batch / (dp x micro_batch)`` micro-batches through the pipeline.

The layers of each pipeline stage and its rules: ``_pipeline_split``.

Mixture of experts (Megatron-Core's expert parallelism): the routed experts of each layer are
split over ``ep`` GPUs and each expert's FFN over ``etp`` (0: tp, Megatron's default); the
ep x etp expert grid is carved out of the tp x cp x dp GPUs of a pipeline stage, and the
remaining factor, ``expert_replicas``, reduces and shards the experts' gradients. ``moe_load``
is the busiest expert-parallel GPU's share of the routed tokens over the mean (1: balanced):
its experts' GEMMs, permutation and all-to-all traffic set every GPU's pace.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Final

from stallscope.plan._errors import PlanError, divisors, listed, nearest_values
from stallscope.plan._model import Model
from stallscope.plan._pipeline_layout import check_layout
from stallscope.plan._pipeline_split import check_as_layers, check_uneven, uneven_split
from stallscope.plan._recompute import RECOMPUTE, RECOMPUTE_MODULES, WHOLE_POLICIES
from stallscope.plan._stack import DEFAULT_STACK, Stack, load_stack

PRECISIONS: Final = ("bf16", "fp16", "fp8", "nvfp4")
ZERO_STAGES: Final = (0, 1, 2, 3)


@dataclass(frozen=True)
class Strategy:
    """Parallel split, batch, memory savers and numerics of one training configuration.

    Memory per parameter (mixed precision with Adam): ``weight_bytes`` (the bf16 / fp16 copy
    the layers use), ``grad_bytes`` (the gradient buffer, also what data parallelism reduces)
    and ``optimizer_bytes`` (fp32 master weights, momentum and variance: 4 + 4 + 4)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1
    global_batch: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False
    zero: int = 0
    interleave: int = 1
    precision: str = "bf16"
    weight_bytes: int = 2
    grad_bytes: int = 2
    optimizer_bytes: int = 12
    cp: int = 1  # context parallel: each sequence split over cp GPUs (ring attention)
    p2p_overlap: bool = False  # pipeline sends behind compute (Megatron's opt-in p2p overlap)
    stack: str | Stack = DEFAULT_STACK  # the training software (a preset's name or a Stack)
    first_stage_layers: int | None = None  # layers of pipeline stage 0 (None: even split)
    last_stage_layers: int | None = None  # layers of the last pipeline stage (None: even split)
    embedding_as_layer: bool = False  # the embedding takes one layer's place in the split
    loss_as_layer: bool = False  # the loss (output layer) takes one layer's place in the split
    #: every chunk's layers in Megatron-Core's notation (``_pipeline_layout``; None: the rules
    #: above)
    pipeline_layout: str | None = None
    ep: int = 1  # expert parallel: each MoE layer's experts split over ep GPUs
    etp: int = 0  # expert tensor parallel: each expert's FFN split over etp GPUs (0: tp)
    #: routed token copies of the busiest expert-parallel GPU over the mean (1: balanced
    #: routing, as the published MoE benchmarks force it); every GPU waits for that one
    moe_load: float = 1.0
    #: with selective recompute, the modules it rebuilds (RECOMPUTE_MODULES: Megatron-Core's
    #: --recompute-modules, torchtitan's per-op policy "ops"; empty: the stack's default)
    recompute_modules: tuple[str, ...] = ()

    @property
    def recomputed(self) -> frozenset[str]:
        """The modules recomputed in the backward (none unless selective; full recompute
        repeats the whole layer)."""
        if self.recompute != "selective":
            return frozenset()
        return frozenset(self.recompute_modules or self.software.selective_recompute.split("+"))

    @property
    def recompute_name(self) -> str:
        """``recompute`` with its modules, as tables and labels write it:
        "selective(layernorm+moe_act)" (``recompute_fields`` reads it back)."""
        mods = self.recompute_modules
        return self.recompute + (f"({'+'.join(mods)})" if mods else "")

    @property
    def uneven(self) -> bool:
        """Whether the stages' layer counts may differ: the first or last stage's count is
        given, the embedding or the loss takes a layer's place, or a layout gives them."""
        return (
            self.pipeline_layout is not None
            or self.first_stage_layers is not None
            or self.last_stage_layers is not None
            or self.embedding_as_layer
            or self.loss_as_layer
        )

    @property
    def as_layers(self) -> int:
        """Slots the embedding and the loss take in the pipeline split (0, 1 or 2)."""
        return int(self.embedding_as_layer) + int(self.loss_as_layer)

    @property
    def software(self) -> Stack:
        """The Stack this configuration runs on."""
        return load_stack(self.stack)

    @property
    def fsdp_gather_bytes(self) -> int:
        """Bytes per parameter of ZeRO-3's weight gather: the stack's, FP8 only in FP8 runs."""
        width = self.software.fsdp_param_bytes
        return 2 if width == 1 and self.precision != "fp8" else width

    @property
    def overlaps_p2p(self) -> bool:
        """Pipeline sends behind compute: asked for, or the stack's default."""
        return self.p2p_overlap or self.software.p2p_overlap

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def replicas(self) -> int:
        """Copies of each weight (data x context parallel): what gradients are reduced and
        ZeRO shards over."""
        return self.dp * self.cp

    @property
    def expert_tp(self) -> int:
        """GPUs each expert's FFN is split over (``etp``, else tp)."""
        return self.etp or self.tp

    @property
    def expert_replicas(self) -> int:
        """Copies of each expert's weights: what the experts' gradients are reduced and
        sharded over (Megatron's expert data parallel group)."""
        return max(1, self.tp * self.cp * self.dp // (self.ep * self.expert_tp))

    @property
    def micro_batches(self) -> int:
        """Micro-batches per replica per step."""
        return self.global_batch // (self.dp * self.micro_batch)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["stack"] = self.software.name
        return out

    def with_(self, **changes: Any) -> Strategy:
        return replace(self, **changes)

    def label(self) -> str:
        """A short name: tp2.pp4.dp8.mb1.rc-full.sp.z1.v2"""
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}", f"mb{self.micro_batch}"]
        if self.cp > 1:
            parts.insert(2, f"cp{self.cp}")
        if self.etp:
            parts.insert(parts.index(f"mb{self.micro_batch}"), f"etp{self.etp}")
        if self.ep > 1:
            parts.insert(parts.index(f"dp{self.dp}") + 1, f"ep{self.ep}")
        if self.moe_load != 1.0:
            parts.insert(parts.index(f"mb{self.micro_batch}"), f"load{self.moe_load:g}")
        parts.append(f"rc-{self.recompute_name}")
        if self.sequence_parallel:
            parts.append("sp")
        parts.append(f"z{self.zero}")
        if self.interleave > 1:
            parts.append(f"v{self.interleave}")
        if self.first_stage_layers is not None:
            parts.append(f"first{self.first_stage_layers}")
        if self.last_stage_layers is not None:
            parts.append(f"last{self.last_stage_layers}")
        if self.embedding_as_layer:
            parts.append("emb-layer")
        if self.loss_as_layer:
            parts.append("loss-layer")
        if self.pipeline_layout is not None:
            parts.append(f"layout[{self.pipeline_layout}]")
        return ".".join(parts)


def fused_attention(model: Model, s: Strategy) -> bool:
    """Whether attention runs as one fused (flash) kernel: the model allows it and the stack
    does not run it unfused."""
    return model.flash_attention and s.software.attention != "unfused"


def gpu_layer_params(model: Model, s: Strategy) -> float:
    """One layer's weights on one GPU: the dense part's tp share, the experts' share of the
    ep x etp grid."""
    return model.dense_layer_params() / s.tp + model.expert_params() / (s.ep * s.expert_tp)


def ffn_rows_width(model: Model, s: Strategy, tokens: int) -> tuple[int, int]:
    """The FFN GEMMs' rows on one GPU for one micro-batch of ``tokens`` (this GPU's share of
    each sequence) and their width per GPU: (tokens, ffn_hidden / tp) for a dense FFN; for
    experts, the routed copies of this GPU's tokens (tokens / tp with sequence parallelism,
    times top_k, times the etp GPUs sharing each expert's tokens) and moe_ffn_hidden / etp."""
    if not model.moe:
        return tokens, model.ffn_hidden // s.tp
    local = tokens // s.tp if s.sequence_parallel else tokens
    rows = round(local * model.top_k * s.expert_tp * s.moe_load)  # the busiest GPU's
    return rows, model.moe_ffn_hidden // s.expert_tp


def _check_moe(model: Model, s: Strategy) -> None:
    load = s.moe_load
    if not model.moe:
        if s.ep > 1 or s.etp or load != 1.0:
            raise PlanError(
                f"ep, etp and moe_load describe experts, but {model.name!r} is a dense model: "
                "use ep 1 and leave etp and moe_load unset, or give the model experts"
            )
        return
    if isinstance(load, bool) or not isinstance(load, int | float) or not 1.0 <= load <= s.ep:
        raise PlanError(
            f"moe_load must be a number from 1 (balanced routing) to ep = {s.ep} (every token "
            f"on one GPU's experts), got {load!r}"
        )
    if model.experts % s.ep:
        raise PlanError(
            f"ep={s.ep} does not divide the {model.experts} experts of {model.name!r}: each "
            f"expert-parallel rank holds whole experts; nearest valid ep: "
            f"{listed(nearest_values(s.ep, divisors(model.experts)))}"
        )
    et = s.expert_tp
    if model.moe_ffn_hidden % et:
        raise PlanError(
            f"expert tensor parallel {et} does not divide moe_ffn_hidden "
            f"({model.moe_ffn_hidden}) of {model.name!r}: nearest valid etp: "
            f"{listed(nearest_values(et, divisors(model.moe_ffn_hidden)))}"
        )
    if model.shared_ffn_hidden % s.tp:
        raise PlanError(
            f"tp={s.tp} does not divide shared_ffn_hidden ({model.shared_ffn_hidden}) of "
            f"{model.name!r}: the shared experts split over tp like a dense FFN; nearest valid "
            f"tp: {listed(nearest_values(s.tp, divisors(model.shared_ffn_hidden)))}"
        )
    grid = s.tp * s.cp * s.dp
    if grid % (s.ep * et):
        near = [e for e in divisors(grid // et) if model.experts % e == 0]
        raise PlanError(
            f"ep x etp = {s.ep} x {et} = {s.ep * et} must divide tp x cp x dp = {grid}: the "
            "expert grid is carved out of each pipeline stage's GPUs; nearest valid ep: "
            f"{listed(nearest_values(s.ep, near))}"
        )
    if s.tp > 1 and not s.sequence_parallel:
        raise PlanError(
            "tensor parallelism with experts needs sequence parallelism (Megatron-Core's rule "
            "for MoE layers): add sequence parallel, or use tp 1"
        )


def recompute_fields(name: str) -> dict[str, Any]:
    """The Strategy fields of a ``Strategy.recompute_name``."""
    recompute, _, mods = name.partition("(")
    return {
        "recompute": recompute,
        "recompute_modules": tuple(m for m in mods.strip(")").split("+") if m),
    }


def _check_recompute_modules(model: Model, s: Strategy) -> None:
    mods = s.recompute_modules
    if not mods:
        return
    if s.recompute != "selective":
        raise PlanError(
            f"recompute modules {listed(list(mods))} are selective recompute's: set recompute "
            f"to selective, or drop them (recompute {s.recompute!r})"
        )
    bad = [m for m in mods if m not in RECOMPUTE_MODULES]
    if bad:
        raise PlanError(
            f"recompute module {listed([repr(b) for b in bad])} is not one of "
            f"{listed(list(RECOMPUTE_MODULES))}"
        )
    whole = [m for m in mods if m in WHOLE_POLICIES]
    if whole and len(mods) > 1:
        raise PlanError(
            f"recompute module {whole[0]!r} is a whole policy ({RECOMPUTE_MODULES[whole[0]]}): "
            f"give it alone, or drop it for {listed([m for m in mods if m not in whole])}"
        )
    needs = {
        "mla_up_proj": (model.mla, "latent attention"),
        "moe_act": (model.moe, "routed experts"),
        "moe": (model.moe, "routed experts"),
        "shared_experts": (bool(model.shared_ffn_hidden), "shared experts"),
        "mlp": (not model.moe or bool(model.dense_layers), "dense FFN layer"),
    }
    for m in mods:
        has, what = needs.get(m, (True, ""))
        if not has:
            raise PlanError(
                f"recompute module {m!r} recomputes {RECOMPUTE_MODULES[m]}, but "
                f"{model.name!r} has no {what}: drop it"
            )


def check(model: Model, s: Strategy, gpus: int | None = None) -> None:
    """Raise PlanError naming the first rule ``s`` breaks for ``model`` (and ``gpus``), with
    the nearest valid choices."""
    for key in ("tp", "pp", "dp", "micro_batch", "global_batch", "interleave", "cp", "ep"):
        v = getattr(s, key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise PlanError(f"{key} must be a positive integer, got {v!r}")
    if not isinstance(s.etp, int) or isinstance(s.etp, bool) or s.etp < 0:
        raise PlanError(f"etp must be a positive integer (or 0 for tp), got {s.etp!r}")
    if s.recompute not in RECOMPUTE:
        raise PlanError(f"recompute {s.recompute!r} is not one of {listed(RECOMPUTE)}")
    _check_recompute_modules(model, s)
    s.software  # noqa: B018 (an unknown stack raises PlanError naming the presets)
    if s.precision not in PRECISIONS:
        raise PlanError(f"precision {s.precision!r} is not one of {listed(PRECISIONS)}")
    if s.zero not in ZERO_STAGES:
        raise PlanError(f"ZeRO stage {s.zero!r} is not one of {listed(ZERO_STAGES)}")
    tp_ok = [t for t in divisors(model.heads) if model.kv_heads % t == 0]
    if model.heads % s.tp or model.kv_heads % s.tp:
        what = "heads" if model.heads % s.tp else "kv_heads"
        raise PlanError(
            f"tp={s.tp} does not divide {what} ({getattr(model, what)}) of {model.name!r}: each "
            f"tensor-parallel rank holds whole heads; nearest valid tp: "
            f"{listed(nearest_values(s.tp, tp_ok))}"
        )
    if (not model.moe or model.dense_layers) and model.ffn_hidden % s.tp:  # dense FFNs
        raise PlanError(
            f"tp={s.tp} does not divide ffn_hidden ({model.ffn_hidden}) of {model.name!r}: "
            f"nearest valid tp: {listed(nearest_values(s.tp, [t for t in tp_ok if model.ffn_hidden % t == 0]))}"
        )
    _check_moe(model, s)
    chunks = s.pp * s.interleave
    if s.pipeline_layout is not None:
        check_layout(model, s)
    elif s.embedding_as_layer is not False or s.loss_as_layer is not False:
        check_as_layers(model, s)
    elif s.uneven:
        check_uneven(model, s)
    elif model.layers % chunks:
        ok = [d for d in divisors(model.layers) if d % s.pp == 0] if s.interleave > 1 else []
        hint = (
            f"nearest valid interleave for pp={s.pp}: "
            f"{listed(nearest_values(s.interleave, [d // s.pp for d in ok]))}"
            if ok and s.interleave > 1
            else f"nearest valid pp: {listed(nearest_values(s.pp, divisors(model.layers)))}"
        )
        ends = uneven_split(model.layers, s.pp, s.interleave)
        if ends is not None:  # Megatron-Core's first / last stage counts would split them
            hint += (
                f"; or first and last stages of their own, e.g. first_stage_layers {ends[0]} and "
                f"last_stage_layers {ends[1]} (--first-stage-layers, --last-stage-layers)"
            )
        raise PlanError(
            f"layers ({model.layers}) of {model.name!r} are not divisible by pp x interleave = "
            f"{s.pp} x {s.interleave} = {chunks}: every pipeline chunk holds the same number of "
            f"layers; {hint}"
        )
    if s.interleave > 1 and s.pp == 1:
        raise PlanError("interleave > 1 needs pipeline parallelism (pp > 1): use interleave 1")
    per = s.dp * s.micro_batch
    if s.global_batch % per:
        lo = max(per, s.global_batch // per * per)
        raise PlanError(
            f"global batch {s.global_batch} is not divisible by dp x micro-batch = {s.dp} x "
            f"{s.micro_batch} = {per}: nearest valid global batches {lo} and {lo + per}; or a "
            f"micro-batch among {listed([m for m in divisors(s.global_batch // s.dp) if (s.global_batch % s.dp) == 0][:8]) or 'none for this dp'}"
        )
    if s.interleave > 1 and s.micro_batches % s.pp:
        raise PlanError(
            f"the interleaved schedule needs the micro-batches per replica ({s.micro_batches}) "
            f"to be a multiple of pp ({s.pp}): change the global batch, micro-batch or dp"
        )
    if s.sequence_parallel and s.tp == 1:
        raise PlanError(
            "sequence parallel splits activations across tensor-parallel ranks: it needs tp > 1"
        )
    if s.cp > 1 and not fused_attention(model, s):
        raise PlanError(
            "context parallelism (ring attention) is modelled with flash attention only: set "
            '"flash_attention": true in the model, a stack whose attention is fused, or cp 1'
        )
    if s.cp > 1 and model.seq_len % (2 * s.cp):
        raise PlanError(
            f"context parallelism splits each sequence into 2 x cp = {2 * s.cp} load-balanced "
            f"chunks: seq_len ({model.seq_len}) must be a multiple of {2 * s.cp}"
        )
    if model.seq_len % s.tp and s.sequence_parallel:
        raise PlanError(
            f"sequence parallel needs seq_len ({model.seq_len}) divisible by tp ({s.tp})"
        )
    if gpus is not None and s.gpus != gpus:
        par = s.tp * s.pp * s.cp
        names = "tp x pp" + (" x cp" if s.cp > 1 else "")
        raise PlanError(
            f"{names} x dp = {s.gpus} GPUs, but the job has {gpus}: with {names} = {par}, dp "
            f"must be {gpus // par}"
            if gpus % par == 0
            else f"{names} x dp = {s.gpus} GPUs, but the job has {gpus}, and {names} = {par} "
            f"does not divide {gpus}: choose them among the divisors {listed(divisors(gpus))}"
        )
