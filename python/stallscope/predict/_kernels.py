"""Kernel classes for scaling compute to another device.

A kernel's time on another device scales with the resource that bounds it: matrix kernels
(GEMM, convolution, attention, tensor-core MMA) with peak FLOP/s, everything else (elementwise,
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
    r"gemm|gemv|cublas|cutlass|xmma|wgmma|hmma|imma|mma_|_mma|conv|cudnn|implicit_?gemm|"
    r"winograd|fft|wgrad|dgrad|fprop|attention|attn|flash|fmha|sdpa|bmm|matmul|"
    r"sm\d\d_xmma|ampere_|volta_|turing_|hopper_|sgemm|hgemm|dgemm",
    re.IGNORECASE,
)


def kernel_class(name: str) -> str:
    """ "matmul" or "memory" for a GPU kernel's name. FBGEMM's GPU kernels are embedding
    lookups and permutations (memory-bound) despite the library's name."""
    return "matmul" if _MATMUL.search(name.replace("fbgemm", "")) else "memory"
