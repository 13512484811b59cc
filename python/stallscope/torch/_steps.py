"""Steps and CPU compute of a program that marks neither: what `stallscope profile` adds to an
unchanged training script (the ``auto_steps`` capture backend).

Steps come from the first source that applies; run.json's ``step_source`` says which:

1. ``optimizer``: the end of each step() of the first torch.optim.Optimizer to step ends a
   training step (global optimizer step hooks), so a step holds the data wait, forward,
   backward and optimizer of one iteration. The first step starts at the model's first
   forward (with no model seen, the first iteration is left out). Marked as they happen.
2. ``profiler``: torch.profiler.profile's start() and each of its step() calls (the boundaries
   of its ProfilerStep#N ranges), when no optimizer stepped.
3. ``forward``: each forward of the model, when neither did (inference, a hand-written update);
   the last step ends where the last forward or backward after it ends.
   Sources 2 and 3 are marked when the trace stops, from the times kept while it ran.
4. ``stallscope.step``: the program marks steps itself (stallscope.step(), loader(...,
   mark_steps=True)); none are added.

The model is the first module with parameters whose forward runs (a DistributedDataParallel
wrapper runs before the module it wraps, so it is the DDP model); a global forward pre-hook finds
it and is removed then.

CPU compute: the model's forward (its forward pre- and post-hooks), every backward
(torch.autograd.backward, which Tensor.backward calls) and every optimizer step are recorded as
regions of category compute named forward / backward / optimizer. On a GPU run the stall table
counts only GPU activity as compute (CUPTI's kernels); the regions stay as annotations. Each
wait for a DataLoader's next batch is a data wait (``next_batch``), as stallscope.loader records.
"""

from __future__ import annotations

import functools
import threading
import weakref
from array import array
from typing import Any

from stallscope import _core
from stallscope.torch._record import record

MAX_KEPT = 1_000_000  # boundaries kept per fallback source (8 bytes each); later ones are not


class _Finder:
    """The state of step finding for the trace that runs it."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.reset(None)

    def reset(self, trace: Any) -> None:
        self.trace = trace
        self.first_forward: int | None = None
        self.forwards = array("q")  # forward starts (fallback 3)
        self.profiler = array("q")  # profiler start / step() times (fallback 2)
        self.last_end = 0  # end of the last forward or backward, ns
        self.optimizer: weakref.ref[Any] | None = None
        self.optimizer_name = ""
        self.marked = 0  # markers recorded here (the core's step index, unless the program marks)
        self.explicit = False  # the program marks its own steps
        self.first_skipped = False

    def stack(self, name: str) -> list[int]:
        s: list[int] | None = getattr(self.local, name, None)
        if s is None:
            s = []
            setattr(self.local, name, s)
        return s

    def watching(self) -> bool:
        from stallscope.capture._trace import active

        return self.trace is not None and self.trace is active() and not self.explicit

    # -- step boundaries ---------------------------------------------------------------------
    def forward_started(self, t: int) -> None:
        if not self.watching() or self.optimizer is not None:
            return
        if self.first_forward is None:
            self.first_forward = t
        if len(self.forwards) < MAX_KEPT:
            self.forwards.append(t)

    def profiler_step(self, t: int) -> None:
        if self.watching() and self.optimizer is None and len(self.profiler) < MAX_KEPT:
            self.profiler.append(t)

    def optimizer_stepped(self, opt: Any, t: int) -> None:
        if not self.watching():
            return
        if self.optimizer is None:
            self.optimizer = weakref.ref(opt)
            self.optimizer_name = f"{type(opt).__name__}.step"
            self.forwards, self.profiler = array("q"), array("q")  # not needed any more
            if _core.step_index() != 0:
                self.explicit = True
                return
            if self.first_forward is not None and self.first_forward < t:
                _core.step(self.first_forward)
                self.marked += 1
            else:
                self.first_skipped = True
        elif self.optimizer() is not opt:
            return  # another optimizer of the same iteration
        if _core.step_index() != self.marked:
            self.explicit = True  # the program marks steps too: its markers win
            return
        _core.step(t)
        self.marked += 1
        self.trace.steps_ended()

    # -- at stop -------------------------------------------------------------------------------
    def finish(self, trace: Any) -> dict[str, Any]:
        """Mark the fallback sources' steps, and say how the steps were found."""
        meta: dict[str, Any]
        if self.explicit or _core.step_index() != self.marked:
            meta = {"source": "stallscope.step", "note": "the program marks its own steps"}
        elif self.optimizer is not None:
            meta = {
                "source": "optimizer",
                "by": self.optimizer_name,
                "steps": max(self.marked - 1, 0),
                "first_step": "left out (no model forward seen before it)"
                if self.first_skipped
                else "starts at the model's first forward",
            }
        elif len(self.profiler) >= 2:
            for t in self.profiler:
                _core.step(t)
            trace.steps_ended()
            meta = {"source": "profiler", "by": "torch.profiler.profile.step"}
            meta["steps"] = len(self.profiler) - 1
        elif self.forwards:
            for t in self.forwards:
                _core.step(t)
            n = len(self.forwards)
            if self.last_end > self.forwards[-1]:
                trace.end_steps(self.last_end)
            else:
                trace.steps_ended()
                n -= 1
            meta = {"source": "forward", "by": _model_name(), "steps": n}
        else:
            meta = {"source": "none", "note": "no optimizer step, profiler step or forward seen"}
        if meta["source"] not in ("stallscope.step", "none"):
            meta["model"] = _model_name()
            if len(self.forwards) >= MAX_KEPT or len(self.profiler) >= MAX_KEPT:
                meta["note"] = f"only the first {MAX_KEPT:,} boundaries were kept"
        self.reset(None)
        return meta


_finder = _Finder()
_installed = False
_gpu_at_first_forward = False  # stallscope profile: start GPU capture once the model runs
_model: weakref.ref[Any] | None = None
_handles: list[Any] = []  # the model's hooks, or the global discovery hook until it is found


def _model_name() -> str:
    m = _model() if _model is not None else None
    return f"{type(m).__name__}.forward" if m is not None else "(no model)"


def _now() -> int:
    return _core.now_ns()


def _on() -> bool:
    """Record regions: a trace that runs this backend records."""
    return _finder.trace is not None and _core.recording()


def _region(name: str, t0: int, t1: int) -> None:
    record("region", "compute", name, t0, t1, lane=_core.current_lane())


def _forward_pre(_module: Any, _args: Any) -> None:
    t = _now()
    _finder.stack("forward").append(t)
    _finder.forward_started(t)


def _forward_post(_module: Any, _args: Any, _output: Any) -> None:
    t1 = _now()
    s = _finder.stack("forward")
    if s:
        t0 = s.pop()
        if _on():
            _region("forward", t0, t1)
            _finder.last_end = t1


def _unhook() -> None:
    for h in _handles:
        h.remove()
    _handles.clear()


def _find_model() -> None:
    """Forget the model of an earlier trace; find this trace's at its first forward."""
    global _model
    import torch.nn.modules.module as module_hooks

    _unhook()
    _model = None
    _finder.local = threading.local()
    _handles.append(module_hooks.register_module_forward_pre_hook(_discover))


def _discover(module: Any, args: Any) -> None:
    global _model
    if _model is not None or next(module.parameters(), None) is None:
        return  # a loss function or another module without parameters
    _unhook()
    _model = weakref.ref(module)
    _handles.append(module.register_forward_pre_hook(_forward_pre))
    # always_call: its end is recorded even when the forward raises
    _handles.append(module.register_forward_hook(_forward_post, always_call=True))
    _forward_pre(module, args)  # this very call is the model's first forward
    if _gpu_at_first_forward:
        _attach_gpu_capture()


def gpu_capture_at_first_forward() -> None:
    """Start the CUPTI backend on the trace at the model's first forward when a GPU can be
    traced (what `stallscope profile` asks for): by then the program has set CUDA up itself, so
    tracing never initialises CUDA in a process before the program would (a DataLoader fork()ed
    after that could not use it), and kernels are recorded from the first step on."""
    global _gpu_at_first_forward
    _gpu_at_first_forward = True


def _attach_gpu_capture() -> None:
    from stallscope.capture import _hooks

    trace = _finder.trace
    if trace is None:
        return
    try:
        on = _hooks.get("cupti").default_on()  # cheap: driver, device, libcupti, no other user
    except Exception:
        return
    if on:
        trace.attach_backend("cupti")


def _optimizer_pre(opt: Any, _args: Any, _kwargs: Any) -> None:
    _finder.stack("optimizer").append(_now())


def _optimizer_post(opt: Any, _args: Any, _kwargs: Any) -> None:
    t1 = _now()
    s = _finder.stack("optimizer")
    if not s:
        return
    t0 = s.pop()
    if _on():
        _region("optimizer", t0, t1)
        _finder.optimizer_stepped(opt, t1)


def _install() -> None:
    """The hooks, once per process (they do nothing while no trace records)."""
    global _installed
    if _installed:
        return
    import torch
    import torch.autograd
    import torch.optim.optimizer as optim_hooks
    import torch.profiler

    optim_hooks.register_optimizer_step_pre_hook(_optimizer_pre)
    optim_hooks.register_optimizer_step_post_hook(_optimizer_post)

    inner_backward = torch.autograd.backward

    @functools.wraps(inner_backward)
    def backward(*args: Any, **kwargs: Any) -> Any:
        if not _on():
            return inner_backward(*args, **kwargs)
        t0 = _now()
        try:
            return inner_backward(*args, **kwargs)
        finally:
            t1 = _now()
            _region("backward", t0, t1)
            _finder.last_end = t1

    torch.autograd.backward = backward

    from torch.utils.data import dataloader

    from stallscope._schema import KIND_ID
    from stallscope.capture._api import region

    wait = region("next_batch", "data", KIND_ID["data_wait"])
    inner_next = dataloader._BaseDataLoaderIter.__next__

    @functools.wraps(inner_next)
    def next_batch(self: Any) -> Any:
        if not _on():
            return inner_next(self)
        with wait:
            return inner_next(self)

    dataloader._BaseDataLoaderIter.__next__ = next_batch  # type: ignore[method-assign]

    prof = torch.profiler.profile
    inner_start, inner_step = prof.start, prof.step

    @functools.wraps(inner_start)
    def start(self: Any) -> None:
        inner_start(self)
        _finder.profiler_step(_now())  # ProfilerStep#0 begins

    @functools.wraps(inner_step)
    def step(self: Any) -> None:
        _finder.profiler_step(_now())  # one ProfilerStep ends, the next begins
        inner_step(self)

    prof.start = start  # type: ignore[method-assign]
    prof.step = step  # type: ignore[method-assign]
    _installed = True


class AutoStepsBackend:
    name = "auto_steps"

    def available(self) -> tuple[bool, str]:
        try:
            import torch  # noqa: F401
        except ImportError:
            return False, "torch is not installed"
        return True, ""

    def default_on(self) -> bool:
        return False  # stallscope profile attaches it

    def on_start(self, trace: Any) -> dict[str, Any] | None:
        ok, why = self.available()
        if not ok:
            raise RuntimeError(why)
        _install()
        _finder.reset(trace)
        _find_model()
        return None

    def on_stop(self, trace: Any) -> dict[str, Any] | None:
        if _finder.trace is not trace:
            return None
        meta = _finder.finish(trace)
        _unhook()
        trace.step_source = meta
        return {"steps": meta.get("steps")}


BACKEND = AutoStepsBackend()
