"""The training software a configuration runs on (``Stack``): which attention kernels, which
overlaps of communication with compute, how FP8 and fully sharded data parallelism move bytes.

Two jobs with the same model, split and cluster differ by their framework: Megatron-LM of 2021
reduced the gradients after the backward, Megatron-Core overlaps them with it; NeMo runs
Transformer Engine's cuDNN attention and hides the tensor-parallel collectives behind the GEMMs
(userbuffers); llm-foundry of 2023 ran PyTorch FSDP with a Triton flash attention. A
``Strategy`` names its stack (``Strategy.stack``); the presets, each with its sources, are in
``plan/data/stacks.json`` (``stacks()``), and a stack may be given as a dict of the fields below
(``"preset"`` names the one it starts from).

Fields:

* ``attention``: ``unfused`` (batched GEMMs + fused softmax), ``flash2``, ``flash3``, ``cudnn``
  (Transformer Engine's fused attention), ``flash-triton`` (the 2022 Triton FlashAttention),
  ``sdpa`` (PyTorch's scaled_dot_product_attention: FlashAttention-2 kernels) or ``auto``
  (cuDNN on Hopper GPUs, FlashAttention-2 elsewhere); used when the model has flash attention.
* ``dp_overlap``: gradient collectives behind the last micro-batch's backward (else after it).
* ``param_gather_overlap``: ZeRO 1-2's weight all-gather behind the next step's forward.
* ``tp_overlap``: tensor-parallel collectives behind the GEMMs (Transformer Engine userbuffers).
* ``tp_backward_overlap``: without userbuffers, each column-parallel linear's backward (QKV and
  FFN-up) launches its data gradient's all-reduce, or reduce-scatter with sequence
  parallelism, asynchronously beside its weight-gradient GEMM, and with sequence parallelism
  re-gathers its input beside its data-gradient GEMM (Megatron-LM's
  ``async_tensor_model_parallel_allreduce``, default from September 2021; Transformer Engine's
  Linear and LayerNormLinear since 1.0); else those collectives wait for the GEMMs.
* ``p2p_overlap``: pipeline sends behind compute (the default of ``Strategy.p2p_overlap`` where
  the caller leaves it to the stack).
* ``fp8_params``: FP8 weights kept as such (no weight casts); ``fp8_recipe``: ``delayed``
  (Transformer Engine: scales from an amax history), ``current`` (Transformer Engine's
  per-tensor current scaling: an amax pass before each activation cast, the weights cast once
  per step), ``dynamic`` (torchao: an amax pass before each cast, the weights cast every
  micro-batch) or ``mxfp8`` (Transformer Engine's MXFP8 block scaling on Blackwell: each input
  cast in both layouts, block-scaled GEMM kernels); ``_fp8`` times them.
* ``fsdp_param_bytes``, ``fsdp_reduce_bytes``: bytes per parameter of ZeRO-3's all-gather and
  of the gradient reduction (2 for 16 bit, 4 for fp32; a gather of 1, FP8 weights, as torchao's
  ``enable_fsdp_float8_all_gather``, applies to FP8 runs, each GPU casting its own shard before
  the gather, and bf16 runs gather 16 bit).
* ``fsdp_backward_prefetch``: when ZeRO-3 gathers a layer's weights for its backward: ``pre``
  (PyTorch FSDP's BACKWARD_PRE: before the backward of the layer after it, so the gather runs
  beside that compute) or ``post`` (BACKWARD_POST: once that layer's gradients are computed, so
  the backward waits for each gather).
* ``selective_recompute``: what selective recompute rebuilds where a configuration names no
  modules (``Strategy.recompute_modules``), "+"-joined: Megatron-Core's default ``core_attn``;
  torchtitan's per-op policy ``ops`` (``selective_ac_option = "op"``).
* ``ep_overlap``: a mixture of experts' all-to-alls behind another micro-batch's compute
  (Megatron-Core's ``overlap_moe_expert_parallel_comm`` with ``delay_wgrad_compute``: the
  forward of one micro-batch and the backward of another run interleaved, each one's
  dispatch and combine beside the other's computation); else on the critical path.
* ``moe_dispatcher``: how a mixture of experts' tokens reach their experts' GPUs:
  ``alltoall`` (Megatron-Core's all-to-all dispatcher: one copy per token and chosen expert)
  or ``flex`` (its flex dispatcher over DeepEP or HybridEP: a token once per GPU holding one of
  its experts, once per such node across the network, forwarded inside the node); ``_dispatch``
  counts the copies.
* ``elementwise``: what the norms and the gated activation keep for the backward: ``fused``
  (Transformer Engine's kernels, or ``torch.compile``'d blocks: their inputs and outputs) or
  ``eager`` (PyTorch's eager operators: each RMSNorm also keeps the fp32 copy of its input it
  normalizes, and SwiGLU the SiLU output; ``bench/activation_memory.py``). Memory only: the
  time model's element-wise kernels are fused ones either way.
* ``gqa_repeat``: with grouped-query attention, K and V repeated to the query heads before the
  attention kernel (torchtitan's ``repeat_kv``), which keeps them at the query width.
* ``loss_bytes``, ``loss_parallel_bytes``, ``loss_saved_bytes``: bytes per logit (tokens x
  vocabulary / tp, on a GPU of the last stage) that the loss holds at its peak, with the
  logits whole on each GPU (``loss_bytes``) or split by vocabulary over tp > 1 GPUs
  (``loss_parallel_bytes``), and that it keeps from its forward until its backward: the 16-bit
  logits, the loss's fp32 copies and the gradient it hands back (``_memory.py``). The default
  is Megatron's vocab-parallel cross-entropy at any tp: an fp32 copy reused in place for the
  softmax and its gradient (4 kept), beside the 16-bit logits in the forward and the
  gradient's 16-bit cast in the backward (6 at the peak). PyTorch's eager ``F.cross_entropy``
  on ``logits.float()`` peaks at 12 (log-softmax's fp32 output beside the backward's two fp32
  gradients), 16 under DTensor's ``loss_parallel``, and 4 under ``torch.compile``
  (``bench/loss_memory.py``); FlashAttention's fused cross-entropy keeps the 16-bit logits and
  writes a 16-bit gradient (4 at the peak, 2 kept).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, Final

import polars as pl

from stallscope.plan._errors import PlanError, listed, nearest_names
from stallscope.plan._recompute import RECOMPUTE_MODULES, WHOLE_POLICIES

ATTENTION: Final = ("unfused", "flash2", "flash3", "cudnn", "flash-triton", "sdpa", "auto")
FP8_RECIPES: Final = ("delayed", "current", "dynamic", "mxfp8")
ELEMENTWISE: Final = ("fused", "eager")
BACKWARD_PREFETCH: Final = ("pre", "post")
MOE_DISPATCHERS: Final = ("alltoall", "flex")
#: The stack a configuration runs on when it does not say.
DEFAULT_STACK: Final = "megatron-core"


@dataclass(frozen=True)
class Stack:
    """A training framework's kernels and overlaps (see the module doc)."""

    name: str
    attention: str = "auto"
    dp_overlap: bool = True
    param_gather_overlap: bool = True
    tp_overlap: bool = False
    tp_backward_overlap: bool = True
    p2p_overlap: bool = False
    fp8_params: bool = False
    fp8_recipe: str = "delayed"
    fsdp_param_bytes: int = 2
    fsdp_reduce_bytes: int = 2
    fsdp_backward_prefetch: str = "pre"
    ep_overlap: bool = False
    moe_dispatcher: str = "alltoall"
    selective_recompute: str = "core_attn"
    elementwise: str = "fused"
    gqa_repeat: bool = False
    loss_bytes: float = 6.0
    loss_parallel_bytes: float = 6.0
    loss_saved_bytes: float = 4.0
    about: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_FIELDS: Final = {f.name for f in fields(Stack)}
_INFORMATIVE: Final = frozenset({"source", "sources", "notes", "preset"})


@cache
def _presets() -> dict[str, dict[str, Any]]:
    doc = json.loads(Path(__file__).with_name("data").joinpath("stacks.json").read_text())
    return {str(e["name"]): dict(e) for e in doc["stacks"]}


def stack_names() -> tuple[str, ...]:
    """Every preset's name, in file order."""
    return tuple(_presets())


def _check(st: Stack, where: str) -> Stack:
    if st.attention not in ATTENTION:
        raise PlanError(f"{where}: attention {st.attention!r} is not one of {listed(ATTENTION)}")
    if st.fp8_recipe not in FP8_RECIPES:
        raise PlanError(
            f"{where}: fp8_recipe {st.fp8_recipe!r} is not one of {listed(FP8_RECIPES)}"
            + (
                "; NVFP4 is a precision of its own: precision 'nvfp4'"
                if st.fp8_recipe == "nvfp4"
                else ""
            )
        )
    if st.elementwise not in ELEMENTWISE:
        raise PlanError(
            f"{where}: elementwise {st.elementwise!r} is not one of {listed(ELEMENTWISE)}"
        )
    if st.fsdp_backward_prefetch not in BACKWARD_PREFETCH:
        raise PlanError(
            f"{where}: fsdp_backward_prefetch {st.fsdp_backward_prefetch!r} is not one of "
            f"{listed(BACKWARD_PREFETCH)}"
        )
    if st.moe_dispatcher not in MOE_DISPATCHERS:
        raise PlanError(
            f"{where}: moe_dispatcher {st.moe_dispatcher!r} is not one of {listed(MOE_DISPATCHERS)}"
        )
    mods = str(st.selective_recompute).split("+")
    bad = [m for m in mods if m not in RECOMPUTE_MODULES]
    if bad:
        raise PlanError(
            f"{where}: selective_recompute {st.selective_recompute!r} names "
            f"{listed([repr(b) for b in bad])}: give modules of {listed(list(RECOMPUTE_MODULES))}"
            ' joined by "+"'
        )
    if len(mods) > 1 and WHOLE_POLICIES & set(mods):
        raise PlanError(
            f"{where}: selective_recompute {st.selective_recompute!r}: 'ops' stands alone"
        )
    if st.fsdp_param_bytes not in (1, 2, 4):
        raise PlanError(
            f"{where}: fsdp_param_bytes must be 1 (FP8 weights gathered), 2 (16 bit) or 4 "
            f"(fp32), got {st.fsdp_param_bytes!r}"
        )
    if st.fsdp_reduce_bytes not in (2, 4):
        raise PlanError(
            f"{where}: fsdp_reduce_bytes must be 2 (16 bit) or 4 (fp32), got "
            f"{st.fsdp_reduce_bytes!r}"
        )
    loss = (st.loss_bytes, st.loss_parallel_bytes, st.loss_saved_bytes)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in loss) or not (
        0 < loss[2] <= min(loss[:2])
    ):
        raise PlanError(
            f"{where}: loss_bytes, loss_parallel_bytes and loss_saved_bytes must be numbers of "
            "bytes per logit, the last (kept for the backward) > 0 and at most the peaks, got "
            f"{', '.join(repr(v) for v in loss)}"
        )
    for k in (
        "dp_overlap", "param_gather_overlap", "tp_overlap", "tp_backward_overlap", "p2p_overlap",
        "fp8_params", "ep_overlap", "gqa_repeat",
    ):  # fmt: skip
        if not isinstance(getattr(st, k), bool):
            raise PlanError(f"{where}: {k} must be true or false, got {getattr(st, k)!r}")
    return st


def _from_fields(doc: Mapping[str, Any], where: str, base: Stack | None = None) -> Stack:
    unknown = [k for k in doc if k not in _FIELDS and k not in _INFORMATIVE]
    if unknown:
        hints = "; ".join(
            f"{u!r} (nearest: {listed(nearest_names(u, _FIELDS, 2))})" for u in unknown
        )
        raise PlanError(f"{where}: unknown stack keys {hints}")
    kw = {k: v for k, v in doc.items() if k in _FIELDS}
    st = replace(base, **kw) if base is not None else Stack(**{"name": "custom"} | kw)
    return _check(st, where)


@cache
def stack(name: str) -> Stack:
    """The preset ``name`` (any case); PlanError with the nearest names when there is none."""
    table = _presets()
    key = next((k for k in table if k.lower() == name.strip().lower()), None)
    if key is None:
        raise PlanError(
            f"no software stack {name!r}: choose one of {listed(tuple(table))} (nearest: "
            f"{listed(nearest_names(name, table, 3))}), or give the stack's fields as a dict"
        )
    return _from_fields(table[key], f"stack {key!r} (plan/data/stacks.json)")


def load_stack(source: Stack | Mapping[str, Any] | str) -> Stack:
    """A Stack from a Stack, a preset's name or a dict of fields (``"preset"``: the preset it
    starts from, else the default stack)."""
    if isinstance(source, Stack):
        return source
    if isinstance(source, str):
        return stack(source)
    base = stack(str(source.get("preset", DEFAULT_STACK)))
    name = str(source.get("name", f"{base.name}+"))
    return _from_fields(dict(source) | {"name": name}, f"stack {name!r}", base)


def stacks() -> pl.DataFrame:
    """The stack presets: one row per stack, its fields and its source."""
    rows = []
    for name, doc in _presets().items():
        src = doc.get("source", {})
        rows.append(
            stack(name).to_dict() | {"source_url": src.get("url", ""), "date": src.get("date", "")}
        )
    return pl.DataFrame(rows)
