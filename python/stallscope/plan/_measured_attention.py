"""Attention rates from a measured efficiency table (``bench/gpu_device_model.py``'s attention
rows: PyTorch's scaled_dot_product_attention forward and backward by head dimension, sequence
length and mask), and which kernel those rows timed.

The rows' FLOPs follow the planner's count (forward 4 b a s^2 d, half with a causal mask;
backward 2.5 x forward). ``curves(rows)`` keeps, per pass, head dimension and mask, the rates
over log2(sequence length); ``rates(curves, ...)`` interpolates them linearly (clamped to the
measured range, the nearest head dimension outside it). ``sdpa_kernel`` names the kernel
PyTorch dispatched: cuDNN's fused attention on the GPUs and versions where PyTorch made it the
default (plan/data/attention.json ``kernels_by_name.sdpa_cudnn``), FlashAttention-2 elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from stallscope.plan._attention import _interp, attention_data

#: (pass, head_dim, mask) -> ((log2 seq, ...), (TFLOP/s, ...)), sequence lengths ascending.
Curves = Mapping[tuple[str, int, str], tuple[tuple[float, ...], tuple[float, ...]]]


def _version(v: str) -> tuple[int, ...]:
    """``"2.11.0+cu130"`` -> (2, 11, 0)."""
    out = []
    for part in v.split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def sdpa_kernel(torch_version: str | None, gpu: str) -> str:
    """The kernel PyTorch's scaled_dot_product_attention ran on ``gpu`` at ``torch_version``:
    ``cudnn`` where PyTorch made cuDNN's attention the default, else ``flash2``."""
    rule = attention_data()["kernels_by_name"]["sdpa_cudnn"]
    on_gpu = any(gpu.upper().startswith(g.upper()) for g in rule["gpus"])
    new = torch_version is not None and _version(torch_version) >= _version(rule["from_torch"])
    return "cudnn" if on_gpu and new else "flash2"


def curves(rows: Iterable[Mapping[str, Any]]) -> Curves:
    """The measured rates of 16-bit rows (bf16 where the table has it, else fp16)."""
    rows = [r for r in rows if r.get("fwd_tflops") and r.get("bwd_tflops") and r.get("seq")]
    dtypes = {str(r.get("dtype", "bf16")) for r in rows}
    keep = "bf16" if "bf16" in dtypes else "fp16"
    points: dict[tuple[str, int, str], dict[float, float]] = {}
    for r in rows:
        if str(r.get("dtype", "bf16")) != keep:
            continue
        mask = "causal" if r.get("causal") else "full"
        x = math.log2(int(r["seq"]))
        for p in ("fwd", "bwd"):
            points.setdefault((p, int(r["head_dim"]), mask), {})[x] = float(r[f"{p}_tflops"])
    return {k: (tuple(sorted(v)), tuple(v[x] for x in sorted(v))) for k, v in points.items()}


def _at(c: Curves, p: str, mask: str, head_dim: int, x: float) -> float | None:
    dims = sorted(d for (q, d, m) in c if q == p and m == mask)
    if not dims:
        return None

    def rate(d: int) -> float:
        xs, ys = c[(p, d, mask)]
        return _interp(list(xs), list(ys), x)

    if head_dim <= dims[0] or head_dim >= dims[-1] or head_dim in dims:
        return rate(min(dims, key=lambda d: abs(d - head_dim)))
    hi = next(d for d in dims if d > head_dim)
    lo = max(d for d in dims if d < head_dim)
    f = (head_dim - lo) / (hi - lo)
    return rate(lo) + f * (rate(hi) - rate(lo))


def rates(c: Curves, head_dim: int, seq: int, causal: bool) -> tuple[float, float] | None:
    """(forward, backward) FLOP/s at the shape, or None where the rows lack the mask."""
    x = math.log2(max(seq, 1))
    mask = "causal" if causal else "full"
    fwd, bwd = _at(c, "fwd", mask, head_dim, x), _at(c, "bwd", mask, head_dim, x)
    if fwd is None or bwd is None:
        return None
    return fwd * 1e12, bwd * 1e12
