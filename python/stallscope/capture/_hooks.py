"""Capture backends that plug into a trace's start and stop (CUPTI, collective tracing, clock
sync). Each lives in a module of its own, named here and imported only when a trace asks for it,
so `import stallscope` never imports CUDA or torch.

A backend module defines ``BACKEND``, an object with:

- ``name: str``
- ``available() -> tuple[bool, str]``: can it run here; the reason when not.
- ``default_on() -> bool``: used when the trace names no backends (``backends=None``): cheap
  checks only (e.g. "torch.distributed is initialised").
- ``on_start(trace) -> dict | None``: called after recording is switched on; returns metadata for
  run.json (under ``backends.<name>``). Raising disables the backend for this trace (reported in
  run.json), never the trace.
- ``on_stop(trace) -> dict | None``: called while recording is still on, before the final drain
  (flush device buffers here).
- ``device`` (optional, default False): the backend records device activity; its on_stop runs
  before the trace takes the end of the last step, the others' after.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

# name -> module defining BACKEND. Add a line per backend.
BACKEND_MODULES: dict[str, str] = {}
BACKEND_MODULES["torch_dist"] = "stallscope.torch._backend"  # collectives, clock sync
BACKEND_MODULES["cupti"] = "stallscope.capture._cupti"  # GPU activity through CUPTI
BACKEND_MODULES["auto_steps"] = "stallscope.torch._steps"  # steps of unchanged programs


class Backend(Protocol):
    name: str

    def available(self) -> tuple[bool, str]: ...

    def default_on(self) -> bool: ...

    def on_start(self, trace: Any) -> dict[str, Any] | None: ...

    def on_stop(self, trace: Any) -> dict[str, Any] | None: ...


def get(name: str) -> Backend:
    try:
        module = BACKEND_MODULES[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}: known are {sorted(BACKEND_MODULES)}") from None
    backend: Backend = importlib.import_module(module).BACKEND
    return backend


def select(names: list[str] | tuple[str, ...] | None) -> list[Backend]:
    """The backends a trace runs: the named ones, or those on by default."""
    if names is not None:
        return [get(n) for n in names]
    out = []
    for n in BACKEND_MODULES:
        try:
            b = get(n)
            if b.default_on():
                out.append(b)
        except Exception:  # a broken optional backend must not stop tracing
            continue
    return out
