"""A real CPU training job on a real data pipeline, written to the differential method's
contract (stallscope.data): the demo's MLP or a ResNet-like CNN on generated JPEG images, or a
tiny next-token model on memory-mapped token shards, alone or under DDP (gloo).

    stallscope analyze -- python -m stallscope.workloads._train
    stallscope analyze --nodes 2 --rate 200mbit -- python -m stallscope.workloads._train --model cnn
    python -m stallscope.workloads._train --out runs/train          # traced on its own

The dataset is generated on first use (under --data, default ~/.cache/stallscope/data) and
declared with stallscope.data.dataset_files, so that a cached run reads it from memory and a
cold run from disk. The loop wraps its loader in stallscope.data.synthetic: STALLSCOPE_DATA and
STALLSCOPE_STEPS decide what it feeds and for how long.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import stallscope
import stallscope.data as sd
from stallscope.workloads import _models


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stallscope" / "data"


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", choices=_models.MODELS, default="mlp")
    p.add_argument("--depth", type=int, default=3, help="MLP: hidden layers; lm: blocks")
    p.add_argument("--width", type=int, default=512, help="MLP: hidden units; cnn: channels")
    p.add_argument("--blocks", type=int, default=3, help="cnn: residual blocks")
    p.add_argument("--batch-size", type=int, default=64, help="samples per rank and step")
    p.add_argument("--workers", type=int, default=1, help="DataLoader worker processes")
    p.add_argument("--steps", type=int, default=30, help="steps when STALLSCOPE_STEPS is unset")
    p.add_argument("--data", type=Path, default=None, help="dataset folder (generated if new)")
    p.add_argument("--images", type=int, default=8192, help="images in a generated dataset")
    p.add_argument("--side", type=int, default=64, help="generated images' side, pixels")
    p.add_argument("--crop", type=int, default=32, help="training crop side, pixels")
    p.add_argument("--seq-len", type=int, default=64, help="lm: tokens per sample")
    p.add_argument("--out", default=None, help="trace into this run directory (standalone)")
    return p.parse_args(argv)


def _dataset(a: argparse.Namespace) -> Any:
    if a.model == "lm":
        root = a.data or _cache_dir() / "tokens-4x1M"
        return sd.TokenShards(sd.write_token_shards(root), seq_len=a.seq_len)
    root = a.data or _cache_dir() / f"images-{a.images}-{a.side}"
    return sd.ImageFiles(sd.write_images(root, a.images, side=a.side), crop=a.crop)


def _model(a: argparse.Namespace) -> Any:
    if a.model == "mlp":
        return _models.mlp(a.depth, a.width, inputs=3 * a.crop * a.crop)
    if a.model == "cnn":
        return _models.cnn(a.blocks, a.width)
    return _models.lm(depth=a.depth)


def train(a: argparse.Namespace) -> int:
    """Train until the loader's step budget ends; returns the steps run."""
    import torch
    import torch.nn.functional as nnf

    torch.manual_seed(0)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dataset = _dataset(a)
    sd.dataset_files(*dataset.files())
    loader = sd.loader(dataset, a.batch_size, workers=a.workers)
    model = _model(a)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    fwd = stallscope.region("forward", "compute")
    bwd = stallscope.region("backward", "compute")
    optr = stallscope.region("optimizer", "compute")
    steps = 0
    budget = None if os.environ.get(sd.STEPS_ENV) else a.steps
    batches = sd.synthetic(loader, steps=budget)
    while True:  # epochs, until the step budget ends
        before = steps
        for x, y in batches:
            opt.zero_grad(set_to_none=True)
            with fwd:
                out = model(x)
                loss: Any = nnf.cross_entropy(
                    out.flatten(0, -2) if a.model == "lm" else out,
                    y.flatten() if a.model == "lm" else y,
                )
            with bwd:
                loss.backward()
            with optr:
                opt.step()
            steps += 1
        if steps == before:
            return steps


def main(argv: list[str] | None = None) -> None:
    a = _args(argv)
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    try:
        if a.out is not None:
            with stallscope.trace(a.out):
                train(a)
        else:
            train(a)
    finally:
        if world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


if __name__ == "__main__":
    main()
