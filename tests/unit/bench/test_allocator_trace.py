"""bench/_allocator_trace.py: the bytes held at the backward and the peaks, on the CPU from a
profiler trace and on a GPU from the caching allocator's counters (here a fake allocator: the
GPU path runs only where a GPU is lent)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))


def test_cpu_trace_kept_and_peak() -> None:
    torch = pytest.importorskip("torch", reason="the trace comes from torch's profiler")
    from _allocator_trace import Mark, held_bytes

    def step(mark: Mark) -> None:
        a = torch.empty(1 << 20, dtype=torch.uint8)  # 1 MiB, kept until the backward
        with mark.backward():
            b = torch.empty(3 << 20, dtype=torch.uint8)  # 3 MiB more at the peak
            del a, b

    got = held_bytes(step, "cpu")
    assert got["peak_reserved"] is None
    assert got["kept"] == pytest.approx(1 << 20, abs=1 << 16)
    assert got["peak"] == pytest.approx(4 << 20, abs=1 << 16)


class FakeCuda:
    """The caching allocator's counters, driven by the step's allocations."""

    def __init__(self) -> None:
        self.allocated, self.reserved, self.peak, self.peak_reserved = 10, 64, 10, 64

    def alloc(self, n: int) -> None:
        self.allocated += n
        self.reserved = max(self.reserved, self.allocated + 32)  # blocks rounded up, cached
        self.peak, self.peak_reserved = (
            max(self.peak, self.allocated),
            max(self.peak_reserved, self.reserved),
        )

    def empty_cache(self) -> None:
        self.reserved = self.allocated

    def reset(self) -> None:
        self.peak, self.peak_reserved = self.allocated, self.reserved


def test_gpu_counters_kept_peak_and_reserved(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch", reason="the GPU path calls torch.cuda")
    from _allocator_trace import Mark, held_bytes

    fake = FakeCuda()
    for name, fn in {
        "synchronize": lambda: None,
        "empty_cache": fake.empty_cache,
        "memory_allocated": lambda: fake.allocated,
        "memory_reserved": lambda: fake.reserved,
        "reset_peak_memory_stats": fake.reset,
        "max_memory_allocated": lambda: fake.peak,
        "max_memory_reserved": lambda: fake.peak_reserved,
    }.items():
        monkeypatch.setattr(torch.cuda, name, fn)

    def step(mark: Mark) -> None:
        fake.alloc(100)  # the forward's activations
        with mark.backward():
            fake.alloc(50)  # the backward's gradients, at the peak
            fake.alloc(-150)

    got = held_bytes(step, "cuda")
    # above the 10 bytes held before the step; the cache emptied first (reserved = allocated)
    assert got == {"kept": 100, "peak": 150, "peak_reserved": 150 + 32}
