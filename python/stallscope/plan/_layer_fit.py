"""What a measured transformer layer says the per-kernel model misses: the ratio of a real
layer's forward + backward time (``bench/gpu_device_model.py``'s layer stack, the "layers"
rows of a measured efficiency table) to the time the planner's layer model gives the same
block, kernel by kernel.

A real step loses time the kernel sums do not see: clocks under sustained power, gaps between
kernels, memory-bound kernels slower than a copy. The median ratio over the measured shapes
becomes the device's ``layer_factor``; the planner adds (factor - 1) x the modelled layer as
the layer's ``measured_gap`` part. Without a measured table the factor is 1.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from stallscope.plan._cluster import Cluster
from stallscope.plan._device_model import DeviceModel
from stallscope.plan._layer import layer_cost
from stallscope.plan._model import Model
from stallscope.plan._strategy import Strategy

#: The measured block: LayerNorm, fused QKV, PyTorch's SDPA (the kernel the table's attention
#: rows timed: ``DeviceModel.attention_measured``), projection, GELU FFN of 4 h, biases; bf16,
#: no parallelism, no recompute.
_BLOCK_STACK = {"preset": "megatron-core"}


def modelled_layer_s(dev: DeviceModel, row: Mapping[str, Any]) -> float:
    """The planner's forward + backward seconds of the measured block of ``row``."""
    h, heads = int(row["hidden"]), int(row["heads"])
    seq, mb = int(row["seq"]), int(row["micro_batch"])
    model = Model(layers=1, hidden=h, heads=heads, seq_len=seq, vocab=1, name="measured block")
    s = Strategy(micro_batch=mb, global_batch=mb, precision=str(row.get("dtype", "bf16")))
    s = s.with_(stack=_BLOCK_STACK | {"attention": dev.attention_measured or "flash2"})
    lc = layer_cost(model, s, Cluster(dev.name, dev.name, 1, 1.0, 1.0, replace(dev)))
    return lc.forward + lc.backward


def fit_layer_factor(
    dev: DeviceModel, rows: Iterable[Mapping[str, Any]], source: str
) -> DeviceModel:
    """``dev`` with ``layer_factor``: the median of measured / modelled layer time over the rows
    that have both times (unchanged when none has)."""
    ratios = [
        (float(r["fwd_seconds"]) + float(r["bwd_seconds"])) / modelled_layer_s(dev, r)
        for r in rows
        if r.get("fwd_seconds") and r.get("bwd_seconds")
    ]
    if not ratios:
        return dev
    factor = statistics.median(ratios)
    basis = dict(dev.basis) | {
        "layer": f"median measured / modelled layer time over {len(ratios)} layers of "
        f"{source}: {factor:.3f}"
    }
    return replace(dev, layer_factor=factor, basis=basis)
