"""Kernel classes for scaling compute to another device.

A kernel's time on another device scales with the resource that bounds it: matrix kernels
(GEMM, convolution, attention, tensor-core MMA; cuBLAS's nvjet kernels are GEMMs) with peak FLOP/s, everything else (elementwise,
reductions, normalisation, copies, embedding lookups) with memory bandwidth. The class comes
from the kernel's name (CUDA library and PyTorch naming), case-insensitively.
"""

from __future__ import annotations

import re
from typing import Final

#: Kernel classes, each with the device figure its time scales with.
CLASSES: Final[dict[str, str]] = {
    "matmul": "flops",  # GEMM, convolution, attention
    "memory": "bandwidth",  # elementwise, reduction, normalisation, copy, gather
    "cpu": "measured",  # compute threads of a CPU run: only a measured ratio scales them
}

_MATMUL: Final = re.compile(
    r"gemm|gemv|cublas|cutlass|nvjet|xmma|wgmma|hmma|imma|mma_|_mma|conv|cudnn|implicit_?gemm|"
    r"winograd|fft|wgrad|dgrad|fprop|attention|attn|flash|fmha|sdpa|bmm|matmul|"
    r"sm\d\d_xmma|ampere_|volta_|turing_|hopper_|sgemm|hgemm|dgemm",
    re.IGNORECASE,
)


def kernel_class(name: str) -> str:
    """ "matmul" or "memory" for a GPU kernel's name. FBGEMM's GPU kernels are embedding
    lookups and permutations (memory-bound) despite the library's name."""
    return "matmul" if _MATMUL.search(name.replace("fbgemm", "")) else "memory"


#: Precision markers in matrix kernels' names, tried in order (lower-case names).
_PRECISION: Final = (
    # 4-bit first: block-scaled FP4 kernels name their E4M3 scales too ("ue4m3xe2m1")
    ("fp4", re.compile(r"fp4|e2m1|nvf4|mxf4")),
    ("fp8", re.compile(r"fp8|e4m3|e5m2")),
    ("bf16", re.compile(r"bf16|bfloat16")),
    ("fp16", re.compile(r"f16|fp16|half|h1688|h16816|h884|hgemm|884gemm")),
    ("tf32", re.compile(r"tf32|s1688|s16816|xf32")),
    ("fp32", re.compile(r"sgemm|fp32|f32|float")),
)


def kernel_precision(name: str) -> str | None:
    """The arithmetic precision a matrix kernel's name states (fp4, fp8, bf16, fp16, tf32,
    fp32), or None. cuBLAS / CUTLASS name tensor-core TF32 kernels "s1688" / "s16816"
    (single-precision inputs on 16x8x8 / 16x8x16 MMA) and FP32 SIMT kernels "sgemm"."""
    low = name.lower()
    for precision, pat in _PRECISION:
        if pat.search(low):
            return precision
    return None
