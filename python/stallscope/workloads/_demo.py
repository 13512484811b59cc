"""A small real PyTorch CPU training loop: an MLP classifier on synthetic images, a DataLoader
with worker processes that decode and augment, SGD. Runs alone or under torchrun (gloo DDP).

    python -m stallscope.workloads._demo --out runs/demo --steps 30
    torchrun --nproc-per-node 2 -m stallscope.workloads._demo --out runs/ddp
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from dataclasses import dataclass
from typing import Any

import stallscope


@dataclass
class WorkloadConfig:
    steps: int = 30
    batch_size: int = 64
    workers: int = 2
    width: int = 512
    depth: int = 3
    image_side: int = 32
    prep_us: int = 200  # extra per-sample preparation time in workers, µs (decode stand-in)
    seed: int = 0


def _require_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise SystemExit(
            "the demo workload needs PyTorch: pip install torch==2.13.0 (CPU build)"
        ) from None
    return torch


def build(cfg: WorkloadConfig) -> tuple[Any, Any, Any, Any]:
    """(model, optimizer, loss_fn, loader) for cfg."""
    torch = _require_torch()
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    class SyntheticImages(Dataset[tuple[Any, Any]]):
        def __init__(self, n: int, side: int, prep_us: int) -> None:
            self.n, self.side, self.prep_us = n, side, prep_us

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int) -> tuple[Any, Any]:
            g = torch.Generator().manual_seed(i)
            img = torch.rand(3, self.side, self.side, generator=g)
            if self.prep_us:  # "decode + augment": busy work, like real preprocessing
                end = time.perf_counter() + self.prep_us * 1e-6
                while time.perf_counter() < end:
                    img = img.flip(-1)
            return img, torch.randint(0, 10, (), generator=g)

    torch.manual_seed(cfg.seed)
    layers: list[Any] = [nn.Flatten(), nn.Linear(3 * cfg.image_side**2, cfg.width), nn.ReLU()]
    for _ in range(cfg.depth - 1):
        layers += [nn.Linear(cfg.width, cfg.width), nn.ReLU()]
    layers.append(nn.Linear(cfg.width, 10))
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    n = cfg.batch_size * (cfg.steps + 2)
    loader = DataLoader(
        SyntheticImages(n, cfg.image_side, cfg.prep_us),
        batch_size=cfg.batch_size,
        num_workers=cfg.workers,
        persistent_workers=False,
        drop_last=True,
    )
    return model, opt, nn.CrossEntropyLoss(), loader


PROGRESS_ENV = "STALLSCOPE_DEMO_PROGRESS"  # a file rank 0 rewrites with "done total" per step


def _progress(done: int, total: int) -> None:
    """Tell `stallscope demo` how far training is (rank 0; never raises)."""
    path = os.environ.get(PROGRESS_ENV)
    if not path or os.environ.get("RANK", "0") != "0":
        return
    try:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{done} {total}\n")
        os.replace(tmp, path)
    except OSError:
        pass


def train(
    cfg: WorkloadConfig, model: Any, opt: Any, loss_fn: Any, loader: Any, traced: bool = True
) -> list[float]:
    """Run cfg.steps steps; returns step times in seconds. With `traced`, every step is marked
    and forward / backward / optimizer / data wait are recorded as regions."""
    fwd = stallscope.region("forward", "compute")
    bwd = stallscope.region("backward", "compute")
    optr = stallscope.region("optimizer", "compute")
    batches = stallscope.loader(loader, mark_steps=True) if traced else iter(loader)
    times: list[float] = []
    t_prev = time.perf_counter()
    for x, y in itertools.islice(batches, cfg.steps):  # islice: no fetch past the last step
        opt.zero_grad(set_to_none=True)
        with fwd:
            loss = loss_fn(model(x), y)
        with bwd:
            loss.backward()
        with optr:
            opt.step()
        now = time.perf_counter()
        times.append(now - t_prev)
        t_prev = now
        _progress(len(times), cfg.steps)
    return times


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)
    cfg = WorkloadConfig(steps=a.steps, batch_size=a.batch_size, workers=a.workers)
    torch = _require_torch()
    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    model, opt, loss_fn, loader = build(cfg)
    if world > 1:
        import torch.distributed as dist

        from stallscope.torch import instrument

        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(model)
        instrument(model)  # DDP buckets and collectives into the trace
    try:
        with stallscope.trace(a.out):
            train(cfg, model, opt, loss_fn, loader)
    finally:
        if world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


if __name__ == "__main__":
    main()
