"""Fused attention kernels' rates by kernel, GPU, head dimension and sequence length, from the
published benchmarks in ``plan/data/attention.json`` (FlashAttention-3's tables on H100;
fractions of the peak elsewhere).

``attention_rates(kernel, gpu, head_dim, seq, causal)`` gives (forward, backward) FLOP/s; the
device model times a layer's attention with them. FLOPs are counted as the FlashAttention papers
count them (forward 4 s^2 d a b, half when causal; backward 2.5 x forward).
"""

from __future__ import annotations

import bisect
import json
import math
from functools import cache
from pathlib import Path
from typing import Any, Final

from stallscope.plan._errors import PlanError

#: The kernels a stack may name (``unfused`` is timed as GEMMs and softmax, not here).
KERNELS: Final = ("flash2", "flash3", "cudnn", "flash-triton", "sdpa", "auto")


@cache
def attention_data() -> dict[str, Any]:
    """plan/data/attention.json."""
    doc: dict[str, Any] = json.loads(
        Path(__file__).with_name("data").joinpath("attention.json").read_text()
    )
    return doc


def _covered(gpu: str) -> bool:
    up = gpu.upper()
    return any(up.startswith(g.upper()) for g in attention_data()["tables"]["gpus"])


def resolve(kernel: str, gpu: str) -> str:
    """The kernel ``kernel`` runs on ``gpu``: ``auto`` is cuDNN where the tables cover the GPU,
    FlashAttention-2 elsewhere; ``sdpa`` is FlashAttention-2."""
    if kernel == "auto":
        return "cudnn" if _covered(gpu) else "flash2"
    return str(attention_data()["kernels_by_name"].get(kernel, kernel))


def _interp(xs: list[float], ys: list[float], x: float) -> float:
    """ys at x, linear between the points, clamped to the ends."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, x)
    f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + f * (ys[i] - ys[i - 1])


def _curve(by_dim: dict[str, dict[str, list[float]]], mask: str, head_dim: int) -> list[float]:
    """The rates of ``mask`` over the table's sequence lengths at ``head_dim``, linear between
    the head dimensions measured (clamped outside)."""
    dims = sorted(int(d) for d, v in by_dim.items() if mask in v)
    if not dims:
        raise KeyError(mask)
    if head_dim <= dims[0] or head_dim >= dims[-1] or head_dim in dims:
        d = min(dims, key=lambda x: abs(x - head_dim))
        return list(by_dim[str(d)][mask])
    i = bisect.bisect_right(dims, head_dim)
    lo, hi = by_dim[str(dims[i - 1])][mask], by_dim[str(dims[i])][mask]
    f = (head_dim - dims[i - 1]) / (dims[i] - dims[i - 1])
    return [a + f * (b - a) for a, b in zip(lo, hi, strict=True)]


def dropout_rates() -> tuple[float, float]:
    """(forward, backward) rate of a fused attention kernel with dropout over its rate without
    (``attention.json`` ``dropout``)."""
    d = attention_data()["dropout"]
    return float(d["fwd"]), float(d["bwd"])


def slowdown(kernel: str) -> float:
    """How many times slower than FlashAttention-2 ``kernel`` runs (1 for the tabled ones)."""
    return float(attention_data()["fractions"]["slower_than_flash2"].get(kernel, 1.0))


def table_rates(
    kernel: str, gpu: str, head_dim: int, seq: int, causal: bool
) -> tuple[float, float] | None:
    """(forward, backward) FLOP/s of ``kernel`` (resolved) on ``gpu`` from the published
    tables, or None where they do not cover the GPU or the kernel (the device's fractions of
    its peak apply there)."""
    if kernel not in KERNELS:
        raise PlanError(f"attention kernel {kernel!r} is not one of {', '.join(KERNELS)}")
    tables = attention_data()["tables"]
    k = resolve(kernel, gpu)
    base = "flash2" if k == "flash-triton" else k
    if not _covered(gpu) or base not in tables["kernels"]:
        return None
    t = tables["kernels"][base]
    xs = [math.log2(s) for s in tables["seq"]]
    x = math.log2(max(seq, 1))
    fwd_full = _interp(xs, _curve(t["fwd"], "full", head_dim), x)
    bwd = _interp(xs, _curve(t["bwd"], "full", head_dim), x)
    fwd = fwd_full
    if causal:
        fwd = _interp(xs, _curve(t["fwd"], "causal", head_dim), x)
        bwd *= fwd / fwd_full
    slower = slowdown(k)
    return fwd * 1e12 / slower, bwd * 1e12 / slower
