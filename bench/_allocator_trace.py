"""What the allocator held while a training step ran: the bytes held when the step's backward
started, the peak, and on a GPU the peak the caching allocator reserved, each above what was
held before the step. Shared by ``loss_memory.py`` and ``activation_memory.py``.

The step runs once first (``torch.compile`` compiles there) and once measured, and wraps its
backward in ``mark.backward()``. On the CPU the figures come from a PyTorch profiler trace
(``profile_memory``: every allocation and free); on a GPU from the CUDA caching allocator's
counters (``memory_allocated`` when the backward starts, ``max_memory_allocated`` and
``max_memory_reserved`` over the step, the cache emptied before it)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BACKWARD = "backward"


class Mark:
    """What a step calls around its backward: ``with mark.backward(): loss.backward()``."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.base = 0  # bytes allocated before the step (CUDA)
        self.kept: int | None = None

    def backward(self) -> Any:
        import torch
        from torch.profiler import record_function

        if self.device == "cuda":
            torch.cuda.synchronize()
            self.kept = torch.cuda.memory_allocated() - self.base
        return record_function(BACKWARD)


def held_bytes(step: Callable[[Mark], None], device: str = "cpu") -> dict[str, int | None]:
    """``kept`` (bytes held when the backward starts), ``peak`` and ``peak_reserved`` (CUDA
    only, else None) of one measured run of ``step``."""
    import torch

    step(Mark(device))  # warm-up
    if device == "cuda":
        mark = Mark(device)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        mark.base, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        torch.cuda.reset_peak_memory_stats()
        step(mark)
        torch.cuda.synchronize()
        return {
            "kept": mark.kept,
            "peak": torch.cuda.max_memory_allocated() - mark.base,
            "peak_reserved": torch.cuda.max_memory_reserved() - reserved,
        }
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(Mark(device))
    fd, name = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(name)
        events = json.loads(Path(name).read_text())["traceEvents"]
    finally:
        os.unlink(name)
    back = min(e["ts"] for e in events if e.get("name") == BACKWARD)
    mem = sorted((e["ts"], int(e["args"]["Bytes"])) for e in events if e.get("name") == "[memory]")
    live = peak = kept = 0
    for ts, b in mem:
        if ts < back:
            kept = live + b
        live += b
        peak = max(peak, live)
    return {"kept": kept, "peak": peak, "peak_reserved": None}


def device_options(ap: argparse.ArgumentParser, results: Path) -> None:
    """--device (cpu or cuda) and --out (default ``results``, on a GPU gpu_<its name>)."""
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"default bench/results/{results.name} (cuda: gpu_{results.name})")  # fmt: skip


def result_path(a: argparse.Namespace, results: Path) -> Path:
    """Where the result goes: --out, else ``results`` (on a GPU gpu_<its name>)."""
    out: Path | None = a.out
    return out or (results.with_name("gpu_" + results.name) if a.device == "cuda" else results)


def write_result(out: Path, what: str, device: str, fields: dict[str, Any]) -> None:
    """The result file: ``what``, the sizes and figures in ``fields``, torch's version, the
    device and the date."""
    import torch

    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    doc = {"what": what} | fields
    doc |= {"torch": torch.__version__, "device": name,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    out.write_text(json.dumps(doc, indent=1) + "\n")
