"""PyTorch integration: torch.distributed collectives, DDP buckets, the NCCL profiler plugin.

Two lines in a training script::

    stallscope.torch.instrument(model)       # after DistributedDataParallel(...)
    with stallscope.trace("runs/exp"): ...   # clocks synced across ranks at start and stop

or none: ``stallscope profile -- torchrun --nproc-per-node 2 train.py``. Importing this package
does not import torch; its functions do.
"""

from __future__ import annotations

from stallscope.torch._instrument import instrument
from stallscope.torch._nccl import enable_plugin, flush_plugin, plugin_path

__all__ = ["enable_plugin", "flush_plugin", "instrument", "plugin_path"]
