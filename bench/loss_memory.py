"""Bytes per logit that a training framework's loss holds: what the planner's memory model
charges the last pipeline stage for its logits (``Stack.loss_bytes``, ``loss_parallel_bytes``,
``loss_saved_bytes``).

At the loss the logits are the largest tensors of a step: Llama 3 8B's 8,192 tokens times a
128,256-entry vocabulary are 1.05 G values per sequence, 4.2 GB at 4 bytes each. How many
bytes per logit a job holds depends on how its framework computes the loss, not on the model:

* ``eager``: ``F.cross_entropy(pred.float(), labels)`` with the model's 16-bit ``pred``
  deleted before the backward (torchtitan's ``loss_fn`` and train loop at 9dec370, December
  2024, whose torch.compile left the loss uncompiled): the fp32 copy, log-softmax's fp32
  output (kept for the backward), then in the backward the gradient of that output, log-softmax's
  gradient and its 16-bit cast.
* ``compiled``: the same function under ``torch.compile`` (torchtitan from 2025 with
  ``compile`` on, ``build_cross_entropy_loss``): the fused kernels keep the 16-bit logits and
  a log-sum-exp per row, and write the 16-bit gradient directly.
* ``loss_parallel``: the eager function on logits split by vocabulary over 2 tensor-parallel
  ranks (a DTensor ``Shard(-1)``, as torchtitan's output layer makes them with tensor
  parallelism) inside ``torch.distributed.tensor.parallel.loss_parallel()``, two processes on
  gloo; per logit of one rank's share.

For each, this script runs the output layer, the loss and the backward on the CPU and reads
the peak of the bytes the CPU allocator held above what it held before (PyTorch profiler,
``profile_memory``), and the bytes held between the forward and the backward, each over
tokens x vocabulary. The allocations are the operators' own, on the CPU as on a GPU (the same
ATen operators; Inductor partitions the joint graph before it generates device code), so the
figures carry to a GPU's caching allocator less its rounding.

Megatron-Core's vocab-parallel cross-entropy (``megatron/core/tensor_parallel/
cross_entropy.py``) is read, not run: one fp32 copy of the 16-bit logits made inside the loss
and reused in place for the softmax and its gradient (4 bytes kept), the 16-bit logits beside
it in the forward and the gradient's 16-bit cast beside it in the backward: 6 at the peak.

On a GPU (``--device cuda``, run by ``gpu_checks.sh``) it measures the eager and compiled losses
with the CUDA caching allocator's counters instead, and also the peak it reserved: what the
planner's 5 % allowance stands for (``bench/results/gpu_loss_memory.json``).

    python bench/loss_memory.py [--tokens 4096] [--vocab 32000] [--only NAME] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _allocator_trace import (  # the bench folder's modules
    Mark,
    device_options,
    held_bytes,
    result_path,
    write_result,
)
from gpu_device_model import torch_for

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "loss_memory.json"
HIDDEN = 256  # the output layer's input width: small, so the logits dominate


def measure(
    loss: Callable[..., Any], tokens: int, vocab: int, mesh: Any = None, device: str = "cpu"
) -> dict[str, float | None]:
    """Peak and kept bytes per logit of ``loss`` on ``tokens`` x ``vocab`` 16-bit logits (and
    on a GPU the peak reserved); with ``mesh``, this rank's vocabulary share as a DTensor under
    ``loss_parallel``."""
    import contextlib

    import torch

    ranks = 1 if mesh is None else mesh.size()
    torch.manual_seed(0)
    bf = {"dtype": torch.bfloat16, "device": device, "requires_grad": True}
    h = torch.randn(tokens, HIDDEN, **bf)
    w = torch.randn(vocab // ranks, HIDDEN, **bf)
    labels = torch.randint(0, vocab, (tokens,), device=device)

    def step(mark: Mark) -> None:
        ctx: Any = contextlib.nullcontext()
        pred = h @ w.t()
        if mesh is not None:
            from torch.distributed.tensor import DTensor, Shard
            from torch.distributed.tensor.parallel import loss_parallel

            pred = DTensor.from_local(pred, mesh, [Shard(-1)], run_check=False)
            ctx = loss_parallel()
        with ctx:
            out = loss(pred, labels)
            del pred  # the train loop frees the model's output before the backward
            with mark.backward():
                out.backward()
        h.grad = w.grad = None

    got = held_bytes(step, device)
    # the output layer's own tensors (its input's and weight's gradients, (vocab + tokens) x
    # HIDDEN x 2 bytes) add at most 0.14 bytes per logit at the default sizes
    n = tokens * vocab // ranks
    row: dict[str, float | None] = {
        "peak_bytes_per_logit": (got["peak"] or 0) / n,
        "kept_bytes_per_logit": (got["kept"] or 0) / n,
    }
    if got["peak_reserved"] is not None:
        row["peak_reserved_bytes_per_logit"] = got["peak_reserved"] / n
    return row


def cross_entropy(pred: Any, labels: Any) -> Any:
    from torch.nn import functional

    return functional.cross_entropy(pred.float(), labels)


def _parallel_rank(rank: int, port: int, tokens: int, vocab: int, out: Path) -> None:
    """One of 2 gloo ranks of the ``loss_parallel`` case; rank 0 writes its figures."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        row = measure(cross_entropy, tokens, vocab, init_device_mesh("cpu", (2,)))
        if rank == 0:
            out.write_text(json.dumps(row))
    finally:
        dist.destroy_process_group()


def measure_parallel(tokens: int, vocab: int) -> dict[str, float]:
    import torch.multiprocessing as mp

    from stallscope.comm._launch import free_port  # for the two ranks' rendezvous

    port = free_port()
    fd, name = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        mp.spawn(_parallel_rank, args=(port, tokens, vocab, Path(name)), nprocs=2, join=True)
        return dict(json.loads(Path(name).read_text()))
    finally:
        os.unlink(name)


def losses(device: str) -> dict[str, Callable[[int, int], dict[str, float | None]]]:
    """The cases: the eager and compiled loss, and (on the CPU: two ranks on one GPU cannot
    share it over NCCL) the eager one under ``loss_parallel``."""
    import torch

    compiled = torch.compile(cross_entropy)
    cases: dict[str, Callable[[int, int], dict[str, float | None]]] = {
        "eager": lambda t, v: measure(cross_entropy, t, v, device=device),
        "compiled": lambda t, v: measure(compiled, t, v, device=device),
    }
    if device == "cpu":
        cases["loss_parallel"] = measure_parallel
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument(
        "--only", choices=("eager", "compiled", "loss_parallel"), help="measure one loss only"
    )
    device_options(ap, RESULTS)
    a = ap.parse_args(argv)
    if torch_for(a.device) is None:  # it says why
        return 0
    rows = {}
    for name, fn in losses(a.device).items():
        if a.only and name != a.only:
            continue
        t0 = time.perf_counter()
        rows[name] = fn(a.tokens, a.vocab) | {"seconds": time.perf_counter() - t0}
        r = rows[name]
        reserved = r.get("peak_reserved_bytes_per_logit")
        print(
            f"{name:9s} peak {r['peak_bytes_per_logit']:5.2f} B/logit, kept for the backward "
            f"{r['kept_bytes_per_logit']:5.2f} B/logit"
            + (f", peak reserved {reserved:5.2f} B/logit" if reserved is not None else "")
        )
    out = result_path(a, RESULTS)
    what = "bytes per logit a loss holds at its peak and between forward and backward"
    write_result(out, what, a.device, {"tokens": a.tokens, "vocab": a.vocab, "losses": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
