"""Per-kernel cost of CUPTI kernel tracing, on the CPU (launch) and on the GPU (run), apart.

    python bench/gpu_cupti_cost.py off|stallscope|kernels_only|torch.profiler [--out F]

Three loops of back-to-back kernels, each timed for the host's enqueue (launch cost, µs per
kernel) and to the end of the GPU's work (synchronized): ``tiny`` (an add on 1,024 floats:
launch-bound), ``medium`` (an add on 4 M floats: about 10 µs on the GPU), ``gemm`` (bf16 4,096^2
matmul: GPU-bound). Each loop runs 3 times after a warm-up; the median is reported. One mode per
process (two CUPTI clients cannot share one)."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time

import torch


def loops() -> dict[str, tuple[object, int]]:
    t = torch.randn(1024, device="cuda")
    m = torch.randn(4 << 20, device="cuda")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    return {
        "tiny": (lambda: t.add_(1.0), 3000),
        "medium": (lambda: m.add_(1.0), 2000),
        "gemm": (lambda: a @ a, 300),
    }


def measure() -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, (fn, n) in loops().items():
        enq, tot = [], []
        for rep in range(4):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()  # type: ignore[operator]
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            if rep:
                enq.append((t1 - t0) / n * 1e6)
                tot.append((t2 - t0) / n * 1e6)
        out[name] = {"enqueue_us": statistics.median(enq), "total_us": statistics.median(tot)}
    return out


def main() -> None:
    mode = sys.argv[1]
    if mode == "off":
        res = measure()
    elif mode in ("stallscope", "kernels_only"):
        import stallscope
        from stallscope.capture import _cupti

        if mode == "kernels_only":
            _cupti.configure(
                runtime_api=False, markers=False, overhead=False, external_correlation=False
            )
        with tempfile.TemporaryDirectory() as d, stallscope.trace(d + "/run"):
            res = measure()
            torch.cuda.synchronize()
    else:
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        ):
            res = measure()
            torch.cuda.synchronize()
    print(json.dumps({"mode": mode, "device": torch.cuda.get_device_name(), **res}))


if __name__ == "__main__":
    main()
