"""The training job of `predict_testbed.py`, one process per rank (run by `stallscope testbed`).

Three MLP models with real DDP over gloo, traced with stallscope:

- demo: the demo's shape (3072 -> 512 -> 512 -> 10), default buckets;
- small: many small layers (24 x 256 -> 256), 1 MB buckets (bucket_cap_mb=1);
- large: few large layers (2048 -> 1024 -> 1024 -> 10), default buckets.

With --emulate the device is emulated: each layer's forward and backward "compute" is a fixed
sleep (the CPU is released, so more ranks than cores can run), in proportion to its parameters,
while its real gradient tensors (zeros of the parameters' shapes) go through DDP's buckets and
gloo on the shaped links. Without it the layers compute for real (torch, one thread per rank).

Each step is marked by the loader (synthetic batches, made up front), forward / backward /
optimizer are compute regions, and stallscope.torch.instrument records buckets and collectives.

    stallscope testbed --nodes 2 --rate 200mbit -- python bench/predict_workload.py \\
        --model demo --steps 12 --out runs/demo-2x1
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from typing import Any

MODELS: dict[str, dict[str, Any]] = {
    "demo": {"dims": [3072, 512, 512, 10], "batch": 1024, "bucket_cap_mb": None},
    "small": {"dims": [256] * 25 + [10], "batch": 1024, "bucket_cap_mb": 1},
    "large": {"dims": [2048, 1024, 1024, 10], "batch": 512, "bucket_cap_mb": None},
}
#: Emulated device: forward and backward time per step (ms), shared by the layers in proportion
#: to their parameters (backward twice forward, as for matrix layers).
EMULATED_FORWARD_MS = 40.0
EMULATED_BACKWARD_MS = 80.0


class _DeviceClock:
    """The emulated device's timeline: layers run back to back, as kernels queued on a device.

    A layer starts when the host issues it or when the previous layer ends, whichever is
    later, and ends its duration after that; the host sleeps until then. The host issues a
    layer when it reaches it, less the time its last sleep overslept: a sleep that wakes late
    (more busy threads than cores: gloo's, the other ranks') delays the host, not the device,
    as a device with work queued does not wait for a host that falls behind. Plain sleeps
    added every late wake-up to the compute: a 4 x 1 run at 200 Mbit/s measured 155 ms of
    compute per step against 126 ms profiled.
    """

    def __init__(self) -> None:
        self.free_at = 0.0  # s, time.monotonic() at which the last queued layer ends
        self.late = 0.0  # s, how late the last sleep woke

    def run(self, seconds: float) -> None:
        issued = time.monotonic() - self.late
        self.free_at = max(issued, self.free_at) + seconds
        time.sleep(max(0.0, self.free_at - time.monotonic()))
        self.late = max(0.0, time.monotonic() - self.free_at)


def build(name: str, emulate: bool) -> tuple[Any, Any, list[Any]]:
    """(model, loss function, batches) of a model."""
    import torch
    from torch import nn

    spec = MODELS[name]
    dims = spec["dims"]
    torch.manual_seed(0)
    linears = [nn.Linear(a, b) for a, b in itertools.pairwise(dims)]
    if not emulate:
        layers: list[Any] = []
        for i, lin in enumerate(linears):
            layers.append(lin)
            if i < len(linears) - 1:
                layers.append(nn.ReLU())
        model = nn.Sequential(*layers)
        batches = [
            (torch.randn(spec["batch"], dims[0]), torch.randint(0, dims[-1], (spec["batch"],)))
            for _ in range(4)
        ]
        return model, nn.CrossEntropyLoss(), batches
    params = [sum(p.numel() for p in lin.parameters()) for lin in linears]
    total = sum(params)

    device = _DeviceClock()

    class Sleep(torch.autograd.Function):
        """The emulated device: wait out the layer's time on the device clock instead of
        computing; gradients are zeros of the parameters' shapes (real tensors for DDP to
        reduce)."""

        @staticmethod
        def forward(ctx: Any, x: Any, w: Any, b: Any, fwd_s: float, bwd_s: float) -> Any:
            device.run(fwd_s)
            ctx.save_for_backward(w, b)
            ctx.bwd_s = bwd_s
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            device.run(ctx.bwd_s)
            w, b = ctx.saved_tensors
            return g, torch.zeros_like(w), torch.zeros_like(b), None, None

    class Emulated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(linears)
            self.fwd = [EMULATED_FORWARD_MS * 1e-3 * n / total for n in params]
            self.bwd = [EMULATED_BACKWARD_MS * 1e-3 * n / total for n in params]

        def forward(self, x: Any) -> Any:
            for lin, f, b in zip(self.layers, self.fwd, self.bwd, strict=True):
                x = Sleep.apply(x, lin.weight, lin.bias, f, b)
            return x

    batches = [(torch.randn(8, 8), None) for _ in range(4)]
    return Emulated(), None, batches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--emulate", action="store_true")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    import torch.distributed as dist

    import stallscope
    import stallscope.torch

    torch.set_num_threads(1)
    model, loss_fn, batches = build(a.model, a.emulate)
    dist.init_process_group("gloo")
    cap = MODELS[a.model]["bucket_cap_mb"]
    kwargs = {} if cap is None else {"bucket_cap_mb": cap}
    ddp = torch.nn.parallel.DistributedDataParallel(model, **kwargs)
    stallscope.torch.instrument(ddp)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    fwd = stallscope.region("forward", "compute")
    bwd = stallscope.region("backward", "compute")
    step = stallscope.region("optimizer", "compute")
    feed = (batches[i % len(batches)] for i in range(a.steps))
    try:
        with stallscope.trace(a.out):
            for x, y in stallscope.loader(feed, mark_steps=True):
                opt.zero_grad(set_to_none=True)
                with fwd:
                    out = ddp(x)
                    loss = out.sum() if loss_fn is None else loss_fn(out, y)
                with bwd:
                    loss.backward()
                with step:
                    opt.step()
    finally:
        dist.destroy_process_group()
    if dist.is_available() and int(os.environ.get("RANK", "0")) == 0:
        print(f"done: {a.model} emulate={a.emulate} steps={a.steps} -> {a.out}", flush=True)


if __name__ == "__main__":
    main()
