"""stallscope.torch.instrument(): the one call that makes torch.distributed traceable."""

from __future__ import annotations

import atexit
import functools
import time
from collections.abc import Callable
from typing import Any

_lifecycle_patched = False
# Called just before the world group is destroyed, while it still exists (the torch.distributed
# capture backend takes its stop-side clock sample here); registered by whoever needs it, so
# this module imports no backend.
_before_destroy: list[Callable[[], None]] = []


def before_destroy(fn: Callable[[], None]) -> None:
    """Call `fn` (once per registration) just before destroy_process_group() tears the world
    group down."""
    if fn not in _before_destroy:
        _before_destroy.append(fn)


# The timing callbacks on collectives' futures, and DDP's Python comm hook (torch's default
# all-reduce hook, which the bucket timing registers), leave a Python callable in a torch Future.
# The backend's worker thread runs it, then destroys it, taking the GIL to do so. A job that
# exits within a few ms of its last collective can reach interpreter finalization first: the
# worker is then made to exit inside a C++ destructor and the process aborts ("terminate called
# without an active exception"; about one exit in eight of a 2-rank gloo DDP job here;
# pytorch/pytorch#190489). At exit, before finalization, the main thread lets go of the GIL a
# few times so that such a thread can finish.
_EXIT_YIELDS = 3
_EXIT_YIELD_S = 0.002  # s per yield: a waiting thread needs microseconds to drop its reference


def _yield_to_comm_threads() -> None:
    for _ in range(_EXIT_YIELDS):
        time.sleep(_EXIT_YIELD_S)


def _uses_nccl(backend: Any) -> bool:
    return backend is not None and "nccl" in str(backend).lower()


def _patch_lifecycle() -> None:
    """init_process_group: point NCCL at the plugin before any communicator exists.
    destroy_process_group: take the stop-side clock sample while the group still exists.
    At exit: let the backends' threads drop the Python callbacks they hold first."""
    global _lifecycle_patched
    if _lifecycle_patched:
        return
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    from stallscope.torch import _collectives
    from stallscope.torch._nccl import enable_plugin

    orig_init = getattr(c10d.init_process_group, "__stallscope_original__", c10d.init_process_group)
    orig_destroy = getattr(
        c10d.destroy_process_group, "__stallscope_original__", c10d.destroy_process_group
    )

    @functools.wraps(orig_init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend", args[0] if args else None)
        if backend is None or _uses_nccl(backend):  # None: torch picks NCCL when CUDA is there
            enable_plugin()
        return orig_init(*args, **kwargs)

    @functools.wraps(orig_destroy)
    def destroy_process_group(group: Any = None) -> Any:
        if group is None or group is dist.group.WORLD:
            for fn in list(_before_destroy):
                fn()
            _collectives.reset_groups()
        return orig_destroy(group)

    init_process_group.__stallscope_original__ = orig_init  # type: ignore[attr-defined]
    destroy_process_group.__stallscope_original__ = orig_destroy  # type: ignore[attr-defined]
    for mod in (c10d, dist):
        setattr(mod, "init_process_group", init_process_group)  # noqa: B010
        setattr(mod, "destroy_process_group", destroy_process_group)  # noqa: B010
    atexit.register(_yield_to_comm_threads)
    _lifecycle_patched = True


def instrument(model: Any = None, *, buckets: bool = True) -> list[str]:
    """Trace torch.distributed in this process: every collective and point-to-point call (op,
    bytes, group, per-group sequence number, start, end) and, with `buckets`, DDP's gradient
    buckets (of `model`, and of every DDP model built later). Events are recorded while a
    stallscope trace records. Call it once, before or after init_process_group; with the NCCL
    backend, call it before the first collective so NCCL loads stallscope's profiler plugin.
    Returns the torch.distributed functions instrumented.

        model = DistributedDataParallel(net)
        stallscope.torch.instrument(model)
        with stallscope.trace("runs/exp"):
            train(model)
    """
    try:
        import torch.distributed as dist
    except ImportError:
        raise ImportError("stallscope.torch needs PyTorch: pip install torch") from None
    if not dist.is_available():
        raise RuntimeError("this PyTorch build has no torch.distributed")
    from stallscope.torch import _collectives, _ddp
    from stallscope.torch._nccl import enable_plugin

    _patch_lifecycle()
    ops = _collectives.patch()
    if dist.is_initialized() and _uses_nccl(dist.get_backend()):
        enable_plugin()
    if buckets:
        _ddp.patch_class()
        if model is not None:
            _ddp.arm(model)
    return ops
