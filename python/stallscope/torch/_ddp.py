"""DDP gradient buckets, timed through a comm-hook wrapper: bucket index, bytes, start and end
of its all-reduce (kind ``bucket``, category comm, correlation = bucket index; the end is when the
hook's future completes, taken in a link chained to it).

DDP takes one comm hook per model, registered once. stallscope wraps the hook the user registers
(DistributedDataParallel.register_comm_hook is patched), and a model with no hook of its own gets
torch's default all-reduce hook, wrapped, just before its first forward (so a hook the user
registers after instrument() still wins). The default hook divides by the world size and then
all-reduces: the same result as DDP's built-in path.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from stallscope import _core
from stallscope._schema import CATEGORY_ID, KIND_ID, format_detail
from stallscope.torch._record import intern

_patched_class = False


_BUCKET, _COMM = KIND_ID["bucket"], CATEGORY_ID["comm"]


def _timed(hook: Callable[..., Any], group_size: int) -> Callable[..., Any]:
    if getattr(hook, "__stallscope_timed__", False):
        return hook
    hook_name = getattr(hook, "__qualname__", "hook").replace(";", "_").replace("=", "_")
    _ids: dict[tuple[Any, ...], tuple[int, int]] = {}  # bucket -> (name id, detail id)

    @functools.wraps(hook)
    def timed(state: Any, bucket: Any) -> Any:
        t0 = _core.now_ns()
        lane = _core.current_lane()
        fut = hook(state, bucket)
        if not _core.recording():
            return fut
        try:
            idx = int(bucket.index())
            buf = bucket.buffer()
            nbytes = int(buf.numel()) * int(buf.element_size())
            facts = (len(bucket.parameters()), int(bool(bucket.is_last())), buf.dtype)
            ids = _ids.get((idx, facts))
            if ids is None:  # the same buckets every step: formatted and interned once
                detail = {
                    "params": facts[0],
                    "last": facts[1],
                    "dtype": str(buf.dtype).replace("torch.", ""),
                    "group_size": group_size,
                    "hook": hook_name,
                }
                ids = (intern(f"bucket{idx}"), intern(format_detail(detail)))
                _ids[(idx, facts)] = ids

            def done(f: Any) -> Any:
                with contextlib.suppress(Exception):
                    _core.record_event(
                        _BUCKET, _COMM, ids[0], t0, _core.now_ns(), idx, nbytes, lane, ids[1]
                    )
                return f.value()  # the hook's result, or its error, passed on

            # A link of the chain DDP waits on, not a callback beside it: DDP sees the bucket
            # done only after its end is taken. (A done callback runs after the future's waiters
            # are woken; it then waited for the GIL while the training thread went on, and the
            # end came up to several ms late, over the next step's forward.)
            return fut.then(done)
        except Exception:  # a tracing problem never breaks training
            return fut

    timed.__stallscope_timed__ = True  # type: ignore[attr-defined]
    return timed


def _world(model: Any) -> int:
    try:
        return int(model.process_group.size())
    except Exception:
        import torch.distributed as dist

        return dist.get_world_size() if dist.is_initialized() else 1


def patch_class() -> None:
    """Wrap every comm hook registered from now on, and arm new DDP models (idempotent)."""
    global _patched_class
    if _patched_class:
        return
    from torch.nn.parallel import DistributedDataParallel

    orig_register = DistributedDataParallel.register_comm_hook
    orig_init = DistributedDataParallel.__init__

    @functools.wraps(orig_register)
    def register_comm_hook(self: Any, state: object, hook: Callable[..., Any]) -> None:
        orig_register(self, state, _timed(hook, _world(self)))

    @functools.wraps(orig_init)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        with contextlib.suppress(Exception):
            arm(self)

    DistributedDataParallel.register_comm_hook = register_comm_hook  # type: ignore[method-assign]
    DistributedDataParallel.__init__ = init  # type: ignore[method-assign]
    _patched_class = True


def arm(model: Any) -> bool:
    """Time `model`'s buckets: before its first forward, register torch's default all-reduce hook
    (wrapped) unless a hook was registered by then. False when `model` is not DDP."""
    from torch.nn.parallel import DistributedDataParallel

    patch_class()
    if not isinstance(model, DistributedDataParallel) or getattr(model, "_stallscope_armed", False):
        return False
    setattr(model, "_stallscope_armed", True)  # noqa: B010 - a torch Module attribute
    handle: Any = None

    def before_first_forward(module: Any, _inputs: Any) -> None:
        handle.remove()
        if getattr(module, "_comm_hooks", None):
            return  # the user's hook (wrapped by register_comm_hook) times the buckets
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        # RuntimeError: a hook registered outside our patch (e.g. a built-in one): keep it
        with contextlib.suppress(RuntimeError):
            module.register_comm_hook(module.process_group, allreduce_hook)

    handle = model.register_forward_pre_hook(before_first_forward)
    return True
