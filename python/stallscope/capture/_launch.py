"""Tracing a program that was not written for stallscope: what `stallscope profile` injects.

`stallscope profile` puts a sitecustomize.py on PYTHONPATH that calls `boot()` at interpreter
start. In a process it should trace (a torchrun worker: RANK is set; or the profiled program
itself when no launcher is used) boot() starts a trace into the run directory, and patches
torch.distributed.init_process_group so that, once the process group exists, collectives, DDP
buckets, topology and clock offsets are traced too; steps and CPU compute are found with no
change to the program (stallscope.torch._steps). The launcher process (torchrun's agent) and the
traced process's own children (DataLoader workers, subprocesses) are not traced.

Each process that should trace writes whether it does into the status folder `stallscope
profile` gives it (STATUS_ENV): `profile` fails when one did not.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

OUT_ENV = "STALLSCOPE_PROFILE_OUT"
MODE_ENV = "STALLSCOPE_PROFILE_MODE"  # "launcher": trace processes with RANK; "process": the first
OVERWRITE_ENV = "STALLSCOPE_PROFILE_OVERWRITE"
STATUS_ENV = "STALLSCOPE_PROFILE_STATUS"  # folder: one <pid>.json per process that should trace


def _report(folder: str | None, traced: bool, why: str = "") -> None:
    """Tell `stallscope profile` (its status `folder`) whether this process traces."""
    if not folder:
        return
    doc = {"pid": os.getpid(), "rank": os.environ.get("RANK"), "traced": traced, "why": why}
    try:
        import json

        with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as f:
            json.dump(doc, f)
    except OSError as e:
        print(f"stallscope profile: cannot report this process's status: {e}", file=sys.stderr)


SITECUSTOMIZE = """\
# Written by `stallscope profile`: start tracing this process, then run any other sitecustomize.
import os as _os
import sys as _sys

try:
    from stallscope.capture._launch import boot as _boot

    _boot()
except Exception as _e:  # never stop the program
    print(f"stallscope profile: not tracing: {_e}", file=_sys.stderr)
_here = _os.path.dirname(_os.path.abspath(__file__))
try:  # run the sitecustomize this one shadows, if any
    import importlib.machinery as _m
    import importlib.util as _u

    _others = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _spec = _m.PathFinder.find_spec("sitecustomize", _others)
    if _spec is not None and _spec.loader is not None:
        _mod = _u.module_from_spec(_spec)
        _spec.loader.exec_module(_mod)
except Exception as _e:
    print(f"stallscope profile: the shadowed sitecustomize failed: {_e}", file=_sys.stderr)
"""


def profile_env(
    out: str | os.PathLike[str],
    site: Path,
    *,
    launcher: bool,
    overwrite: bool,
    status: Path | None = None,
) -> dict[str, str]:
    """The environment that makes a program's processes trace themselves into `out`: writes
    SITECUSTOMIZE into the folder `site` and returns PYTHONPATH (site first, then this
    process's PYTHONPATH) and the STALLSCOPE_PROFILE_* variables. `launcher`: the program is
    torchrun, whose workers (processes with RANK) are traced, not itself. `status`: a folder
    where each process that should trace writes whether it does (`<pid>.json`)."""
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.environ.get("PYTHONPATH", "")
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(site), path) if p),
        OUT_ENV: str(Path(out).resolve()),
        MODE_ENV: "launcher" if launcher else "process",
        OVERWRITE_ENV: "1" if overwrite else "0",
    }
    if status is not None:
        env[STATUS_ENV] = str(status)
    return env


def _should_trace() -> bool:
    if not os.environ.get(OUT_ENV):
        return False
    if os.environ.get(MODE_ENV, "process") == "launcher":
        return "RANK" in os.environ  # torchrun's agent has no RANK; its workers do
    return True


def boot() -> None:
    """Start tracing this process if `stallscope profile` asked for it (never raises)."""
    if not _should_trace():
        return
    out = os.environ.pop(OUT_ENV)  # children of this process are not traced
    status = os.environ.pop(STATUS_ENV, None)  # nor do they report
    overwrite = os.environ.get(OVERWRITE_ENV) == "1"
    try:
        import stallscope

        trace = stallscope.start(out, backends=(), overwrite=overwrite)
    except Exception as e:
        print(f"stallscope profile: not tracing this process: {e}", file=sys.stderr)
        _report(status, False, str(e))
        return
    _report(status, True)
    try:
        import torch  # noqa: F401
    except ImportError:
        return  # no torch: regions, steps and markers only
    trace.attach_backend("auto_steps")  # steps and CPU compute with no markers
    from stallscope.torch._steps import gpu_capture_at_first_forward

    gpu_capture_at_first_forward()  # GPU kernels through CUPTI, from the model's first forward
    try:
        _hook_torch(trace)
    except ImportError:
        pass
    except Exception as e:
        print(f"stallscope profile: torch.distributed not traced: {e}", file=sys.stderr)


def _hook_torch(trace: Any) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    import torch.distributed.distributed_c10d as c10d

    import stallscope.torch

    stallscope.torch.instrument(None)  # collectives, DDP buckets, lifecycle patches

    if dist.is_initialized():
        trace.attach_backend("torch_dist")
        return
    inner = c10d.init_process_group

    @functools.wraps(inner)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = inner(*args, **kwargs)
        if trace.recording:
            trace.attach_backend("torch_dist")  # topology + clock sync at start
        return result

    init_process_group.__stallscope_original__ = getattr(  # type: ignore[attr-defined]
        inner, "__stallscope_original__", inner
    )
    c10d.init_process_group = init_process_group
    dist.init_process_group = init_process_group
