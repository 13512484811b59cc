"""What the CPU allocator held while a training step ran, read from a PyTorch profiler trace
(``profile_memory``): the bytes held when the step's backward started and the peak, both above
what was held before the step. Shared by ``loss_memory.py`` and ``activation_memory.py``.

The step marks its backward with ``record_function(BACKWARD)``; it runs once unprofiled first
(``torch.compile`` compiles there) and once under the profiler."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BACKWARD = "backward"


def held_bytes(step: Callable[[], None]) -> tuple[int, int]:
    """(bytes held when the backward starts, peak bytes) of one profiled run of ``step``."""
    from torch.profiler import ProfilerActivity, profile

    step()  # warm-up
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
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
    return kept, peak


def write_result(out: Path, what: str, fields: dict[str, Any]) -> None:
    """The result file: ``what``, the sizes and figures in ``fields``, torch's version, the
    device and the date."""
    import torch

    doc = {"what": what} | fields
    doc |= {"torch": torch.__version__, "device": "cpu",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    out.write_text(json.dumps(doc, indent=1) + "\n")
