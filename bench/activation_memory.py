"""Activations a Llama block keeps for its backward, measured, beside the planner's per-layer
activations (``plan._memory.layer_activation_bytes``) for the same block and policy.

The block is torchtitan's Llama 3 block as its model code writes it (at 9dec370, December 2024,
and e7c0cae, June 2025): RMSNorm that normalizes an fp32 copy of its input, rotary embedding on
complex fp32 views of Q and K, K and V repeated to the query heads (``repeat_kv``) before
PyTorch's ``scaled_dot_product_attention``, and a SwiGLU FFN ``w2(silu(w1(x)) * w3(x))``, all in
bf16. Each is run without recompute, with full recompute (the block's input kept) and with
torchtitan's per-op selective policy (outputs of matmuls but every second one, attention and max
kept; the rest recomputed), in eager PyTorch and under ``torch.compile``.

The bytes kept per layer are the allocator's (PyTorch profiler, ``profile_memory``) when the
backward starts, above what was held before the step (the weights and the input), two blocks
less one (what the loss holds cancels), over tokens x hidden (s b h). The CPU runs the operators a GPU runs, and autograd saves the same
tensors on either, so the figures carry to a GPU. The planner's figure is for the same model
with the ``torchtitan-2024`` stack, element-wise ops ``eager`` or ``fused`` to match the run.

What it shows (``bench/results/activation_memory.json``): the per-op policy's and full
recompute's figures are the planner's; without recompute, the compiled block keeps what the
planner's fused kernels keep, and eager PyTorch keeps each RMSNorm's fp32 input copy (4 bytes a
value, two norms) and the SiLU output (2 bytes x the FFN width) on top: 8 sbh + 2 sbf.

On a GPU (``--device cuda``, run by ``gpu_checks.sh``) the bytes come from the CUDA caching
allocator's counters, with the peak it reserved over the peak allocated beside them
(``bench/results/gpu_activation_memory.json``).

    python bench/activation_memory.py [--seq 256] [--batch 2] [--eager-only] [--device cuda]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _allocator_trace import (  # the bench folder's modules
    Mark,
    device_options,
    held_bytes,
    result_path,
    write_result,
)
from gpu_device_model import torch_for

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "activation_memory.json"
#: hidden, heads, KV heads, FFN width: Llama 3 8B's ratios (GQA 4:1, FFN 3.5 h) at a small
#: hidden, and the same with multi-head attention (no repeat)
SHAPES = {"gqa": (512, 8, 2, 1792), "mha": (512, 8, 8, 1792)}


def _block_class() -> Any:
    import torch
    from torch import nn
    from torch.nn import functional

    class RMSNorm(nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim, dtype=torch.bfloat16))

        def forward(self, x: Any) -> Any:
            xf = x.float()  # the fp32 copy torchtitan's RMSNorm normalizes
            normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
            return normed.type_as(x) * self.weight

    def rotary(x: Any, freqs: Any) -> Any:
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * freqs).flatten(3).type_as(x)

    class Block(nn.Module):
        def __init__(self, hidden: int, heads: int, kv_heads: int, ffn: int) -> None:
            super().__init__()
            hd, bf = hidden // heads, torch.bfloat16
            self.heads, self.kv_heads, self.hd = heads, kv_heads, hd
            self.attention_norm, self.ffn_norm = RMSNorm(hidden), RMSNorm(hidden)
            self.wq = nn.Linear(hidden, heads * hd, bias=False, dtype=bf)
            self.wk = nn.Linear(hidden, kv_heads * hd, bias=False, dtype=bf)
            self.wv = nn.Linear(hidden, kv_heads * hd, bias=False, dtype=bf)
            self.wo = nn.Linear(heads * hd, hidden, bias=False, dtype=bf)
            self.w1 = nn.Linear(hidden, ffn, bias=False, dtype=bf)
            self.w3 = nn.Linear(hidden, ffn, bias=False, dtype=bf)
            self.w2 = nn.Linear(ffn, hidden, bias=False, dtype=bf)

        def forward(self, x: Any, freqs: Any) -> Any:
            b, s, _ = x.shape
            h = self.attention_norm(x)
            q = rotary(self.wq(h).view(b, s, self.heads, self.hd), freqs)
            k = rotary(self.wk(h).view(b, s, self.kv_heads, self.hd), freqs)
            v = self.wv(h).view(b, s, self.kv_heads, self.hd)
            rep = self.heads // self.kv_heads  # repeat_kv: K and V at the query heads
            k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
            o = functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            )
            x = x + self.wo(o.transpose(1, 2).reshape(b, s, -1))
            h = self.ffn_norm(x)
            return x + self.w2(functional.silu(self.w1(h)) * self.w3(h))

    return Block


def _op_policy() -> Any:
    """torchtitan's per-op policy: keep the outputs of the listed operators but every second
    matmul, recompute the rest."""
    import torch
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    ops = torch.ops.aten
    keep = {
        ops.mm.default,
        ops._scaled_dot_product_flash_attention.default,
        ops._scaled_dot_product_efficient_attention.default,
        ops._scaled_dot_product_flash_attention_for_cpu.default,
        ops._scaled_dot_product_cudnn_attention.default,  # PyTorch >= 2.9's choice on Hopper
        ops.max.default,
    }
    counts: dict[str, int] = defaultdict(int)

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        key = "recompute" if ctx.is_recompute else "forward"
        if func == ops.mm.default:
            counts[key] += 1
        kept = func in keep and not (func == ops.mm.default and counts[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if kept else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def kept_bytes(shape: tuple[int, int, int, int], policy: str, compiled: bool, seq: int,
               batch: int, layers: int, device: str = "cpu") -> dict[str, int | None]:  # fmt: skip
    """What the allocator holds when the backward of ``layers`` blocks starts (``kept``), its
    peak and (CUDA) its peak reserved, above what it held before the step."""
    import torch
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    hidden, heads, kv_heads, ffn = shape
    torch.manual_seed(0)
    block = _block_class()
    mods = []
    for _ in range(layers):
        m = block(hidden, heads, kv_heads, ffn).to(device)
        if policy == "full":
            m = checkpoint_wrapper(m, preserve_rng_state=False)
        elif policy == "ops":
            m = checkpoint_wrapper(m, context_fn=_op_policy, preserve_rng_state=False)
        mods.append(torch.compile(m) if compiled else m)
    hd = hidden // heads
    freqs = torch.polar(torch.ones(seq, hd // 2), torch.randn(seq, hd // 2)).view(1, seq, 1, -1)
    freqs = freqs.to(device)
    x0 = torch.randn(batch, seq, hidden, dtype=torch.bfloat16, device=device, requires_grad=True)

    def step(mark: Mark) -> None:
        x = x0
        for m in mods:
            x = m(x, freqs)
        loss = x.float().pow(2).mean()
        with mark.backward():
            loss.backward()

    return held_bytes(step, device)


def planner_bytes(shape: tuple[int, int, int, int], policy: str, compiled: bool, seq: int,
                  batch: int) -> float:  # fmt: skip
    from stallscope.plan import Strategy, load_model, load_stack
    from stallscope.plan._memory import layer_activation_bytes

    hidden, heads, kv_heads, ffn = shape
    m = load_model({"layers": 2, "hidden": hidden, "heads": heads, "kv_heads": kv_heads,
                    "ffn_hidden": ffn, "seq_len": seq, "vocab": 1000, "gated_ffn": True})  # fmt: skip
    stack = load_stack(
        {"preset": "torchtitan-2024", "elementwise": "fused" if compiled else "eager"}
    )
    rc = {"none": "none", "full": "full", "ops": "selective"}[policy]
    st = Strategy(micro_batch=batch, global_batch=batch, recompute=rc, stack=stack)
    return layer_activation_bytes(m, st)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--eager-only", action="store_true", help="skip torch.compile (faster)")
    device_options(ap, RESULTS)
    a = ap.parse_args(argv)
    if torch_for(a.device) is None:  # it says why
        return 0
    rows = []
    for name, shape in SHAPES.items():
        sbh = a.seq * a.batch * shape[0]
        for policy in ("none", "full", "ops"):
            for compiled in (False,) if a.eager_only else (False, True):
                t0 = time.perf_counter()
                two = kept_bytes(shape, policy, compiled, a.seq, a.batch, 2, a.device)
                one = kept_bytes(shape, policy, compiled, a.seq, a.batch, 1, a.device)
                plan = planner_bytes(shape, policy, compiled, a.seq, a.batch)
                row: dict[str, Any] = {
                    "shape": name, "policy": policy, "compiled": compiled,
                    "measured_per_sbh": ((two["kept"] or 0) - (one["kept"] or 0)) / sbh,
                    "planner_per_sbh": plan / sbh,
                    "seconds": time.perf_counter() - t0,
                }  # fmt: skip
                if two["peak_reserved"] is not None and two["peak"]:  # the allocator's cache
                    row["reserved_over_peak"] = two["peak_reserved"] / two["peak"]
                rows.append(row)
                print(
                    f"{name} {policy:4s} {'compiled' if compiled else 'eager   '} kept "
                    f"{row['measured_per_sbh']:6.2f} sbh, planner {row['planner_per_sbh']:6.2f}"
                )
    shapes = {k: dict(zip(("hidden", "heads", "kv_heads", "ffn_hidden"), v, strict=True))
              for k, v in SHAPES.items()}  # fmt: skip
    out = result_path(a, RESULTS)
    what = "bytes one Llama block keeps for its backward, per token x hidden (s b h)"
    fields = {"shapes": shapes, "seq": a.seq, "batch": a.batch, "rows": rows}
    write_result(out, what, a.device, fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
