"""GPU capture: the CUPTI activity backend (native side in csrc/cupti/).

libcupti is loaded with dlopen at run time, never linked. Where it is looked for, in order:

1. ``STALLSCOPE_CUPTI_LIBRARY``: an explicit path; when set, nothing else is tried.
2. A libcupti this process already loaded (e.g. torch's): two copies of CUPTI in one process
   cannot both work.
3. ``CUDA_HOME`` / ``CUDA_PATH``, then ``/usr/local/cuda``: ``lib64``, ``extras/CUPTI/lib64``.
4. The NVIDIA wheels: ``nvidia/cu13/lib/libcupti.so.13`` (nvidia-cuda-cupti 13.x) and
   ``nvidia/cuda_cupti/lib/libcupti.so.12`` (nvidia-cuda-cupti-cu12) in every site directory.
5. The dynamic loader's own search (``libcupti.so.13``, ``.12``, ``libcupti.so``).

While a trace runs, GPU records are written on stallscope's clock (registered with
cuptiActivityRegisterTimestampCallback before any kind is enabled); step() and regions push
external correlation ids, so kernels, copies and syncs carry ``step=N;region=NAME`` in their
detail; the runtime launch records (kind ``runtime``) carry the same correlation id as the GPU
work they launched, which gives launch delay and per-stream queue depth (`launches`). Runtime
events sit on the OS thread that made the call when that thread used stallscope's API while
CUPTI ran (CUPTI names threads by pthread_self; the pair is registered then), else on CUPTI's
thread id. At stop:
a forced flush, the drop counts into run.json (``backends.cupti``), and cuptiFinalize.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import site
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stallscope import _core
from stallscope.exceptions import StallscopeError, StallscopeWarning

ENV_LIBRARY = "STALLSCOPE_CUPTI_LIBRARY"

# Host buffers handed to CUPTI (Kineto uses 4 MiB) and the cap on all of them together; past the
# cap buffer requests are declined and CUPTI drops records (counted in run.json).
DEFAULT_BUFFER_BYTES = 4 << 20
DEFAULT_POOL_LIMIT_BYTES = 64 << 20


@dataclass
class Options:
    """Settings of the next CUPTI session (`configure`)."""

    buffer_bytes: int = DEFAULT_BUFFER_BYTES
    pool_limit_bytes: int = DEFAULT_POOL_LIMIT_BYTES
    device_buffer_bytes: int = 0  # CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE; 0 = CUPTI's default
    runtime_api: bool = True
    markers: bool = True
    overhead: bool = True
    external_correlation: bool = True
    finalize: bool = True  # cuptiFinalize at stop: CUPTI's instrumentation leaves the process


_options = Options()


def configure(**changes: Any) -> Options:
    """Change the CUPTI settings used by the next trace (fields of `Options`)."""
    global _options
    unknown = set(changes) - set(Options.__dataclass_fields__)
    if unknown:
        raise ValueError(
            f"unknown CUPTI option(s) {sorted(unknown)}: use {sorted(Options.__dataclass_fields__)}"
        )
    new = Options(**{**_options.__dict__, **changes})
    if new.buffer_bytes < 4096 or new.pool_limit_bytes < new.buffer_bytes:
        raise ValueError(
            f"buffer_bytes={new.buffer_bytes} must be >= 4096 and pool_limit_bytes="
            f"{new.pool_limit_bytes} >= buffer_bytes"
        )
    _options = new
    return new


# -- finding and loading libcupti ------------------------------------------------------------------
def _site_dirs() -> list[str]:
    dirs: list[str] = []
    with contextlib.suppress(AttributeError):  # some virtualenv layouts lack it
        dirs.extend(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        dirs.append(site.getusersitepackages())
    dirs.extend(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return list(dict.fromkeys(dirs))


def _already_loaded() -> list[str]:
    """libcupti files mapped into this process (by torch, for example)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    found = []
    for line in maps.splitlines():
        path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
        if "/libcupti.so" in path and path not in found:
            found.append(path)
    return found


def candidates() -> list[str]:
    """The libcupti paths tried, in order (see the module docstring)."""
    explicit = os.environ.get(ENV_LIBRARY)
    if explicit:
        return [explicit]
    out: list[str] = list(_already_loaded())
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in roots:
        if not root:
            continue
        for sub in ("lib64", "extras/CUPTI/lib64", "lib"):
            for name in ("libcupti.so", "libcupti.so.13", "libcupti.so.12"):
                p = os.path.join(root, sub, name)
                if os.path.exists(p):
                    out.append(p)
    for d in _site_dirs():
        out.extend(sorted(glob.glob(os.path.join(d, "nvidia", "cu13", "lib", "libcupti.so.13*"))))
        out.extend(
            sorted(glob.glob(os.path.join(d, "nvidia", "cuda_cupti", "lib", "libcupti.so.12*")))
        )
    out.extend(["libcupti.so.13", "libcupti.so.12", "libcupti.so"])
    return list(dict.fromkeys(out))


@dataclass
class LoadResult:
    ok: bool
    path: str = ""
    version: int = 0
    tried: list[str] = field(default_factory=list)


_load_result: LoadResult | None = None


def load() -> LoadResult:
    """Load libcupti (once per process; later calls return the first result that loaded)."""
    global _load_result
    if _load_result is not None and _load_result.ok:
        return _load_result
    r = _core.cupti_load(candidates())
    _load_result = LoadResult(bool(r["ok"]), str(r["path"]), int(r["version"]), list(r["tried"]))
    return _load_result


# -- what stops CUPTI from working here --------------------------------------------------------------
def _driver_status() -> tuple[bool, str]:
    ok, why = _core.cupti_driver_loadable()
    return bool(ok), str(why)


def _device_status() -> tuple[bool, str]:
    """Is there an NVIDIA GPU this process may use (cheap: no CUDA initialisation)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return False, f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                n = int(torch.cuda.device_count())
                return (n > 0, f"torch sees {n} CUDA device(s)")
        except Exception:  # a broken torch install must not break tracing
            pass
    gpus = glob.glob("/proc/driver/nvidia/gpus/*")
    if gpus:
        return True, f"{len(gpus)} NVIDIA GPU(s) in /proc/driver/nvidia/gpus"
    if glob.glob("/dev/nvidia[0-9]*"):
        return True, "NVIDIA device files in /dev"
    return False, "no NVIDIA GPU found (/proc/driver/nvidia/gpus and /dev/nvidia* are absent)"


def other_tools() -> list[str]:
    """Other CUPTI users detected in this process: each entry says which and how we know."""
    found: list[str] = []
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch._C._autograd._profiler_enabled():
                found.append(
                    "torch.profiler is active in this process (its Kineto backend owns CUPTI's "
                    "activity buffers)"
                )
        except Exception:  # private API: absent in some torch versions
            pass
    inj = os.environ.get("CUDA_INJECTION64_PATH")
    if inj:
        found.append(
            f"CUDA_INJECTION64_PATH={inj} (an injected CUDA tool: Nsight Systems / Nsight Compute)"
        )
    nsys = sorted(k for k in os.environ if k.startswith(("NSYS_", "NSIGHT_", "NV_NSIGHT")))
    if nsys:
        found.append(f"Nsight environment variables {nsys}")
    preload = os.environ.get("LD_PRELOAD", "")
    if "ToolsInjection" in preload or "nsight" in preload.lower():
        found.append(f"LD_PRELOAD={preload} (Nsight injection)")
    if _last_start_error.get("other_subscriber"):
        found.append(str(_last_start_error["error"]))
    return found


_last_start_error: dict[str, Any] = {}
_set_env: list[str] = []  # environment variables on_start set, removed again at stop


def _no_libcupti(tried: list[str]) -> tuple[bool, str]:
    listing = "; ".join(tried) if tried else "no candidate path"
    return (
        False,
        f"no libcupti: {listing}. Install nvidia-cuda-cupti (pip) or a CUDA toolkit, or set "
        f"{ENV_LIBRARY}=/path/to/libcupti.so",
    )


def status() -> tuple[bool, str]:
    """(available, why): libcupti loads, a driver and a device exist, no other CUPTI user.

    Cheap checks come first: libcupti is dlopen'ed only once a driver and a device were found
    (or when it is already loaded), so asking on a machine without a GPU loads nothing."""
    if not _core.cupti_loaded():
        explicit = os.environ.get(ENV_LIBRARY)
        if explicit and not os.path.exists(explicit):
            return _no_libcupti([f"{ENV_LIBRARY}={explicit}: no such file"])
        found = [c for c in candidates() if os.path.sep in c and os.path.exists(c)]
        where = f"libcupti found at {found[0]}" if found else "no libcupti file found either"
        ok, why = _driver_status()
        if not ok:
            return False, f"no driver: {why} ({where})"
        ok, why = _device_status()
        if not ok:
            return False, f"no device: {why} ({where})"
    r = load()
    if not r.ok:
        return _no_libcupti(r.tried)
    ok, why = _driver_status()
    if not ok:
        return (
            False,
            f"no driver: {why} (libcupti {r.path} loaded, but CUPTI needs the NVIDIA driver)",
        )
    ok, why = _device_status()
    if not ok:
        return False, f"no device: {why}"
    others = other_tools()
    if others:
        return False, "another subscriber: " + "; ".join(others)
    return True, f"libcupti {r.path} (CUPTI API {r.version})"


# -- the backend ----------------------------------------------------------------------------------
class CuptiBackend:
    name = "cupti"
    device = True  # stops before the last step's end is taken (Trace.stop)

    def available(self) -> tuple[bool, str]:
        return status()

    def default_on(self) -> bool:
        return status()[0]

    def on_start(self, trace: Any) -> dict[str, Any]:
        r = load()
        if not r.ok:
            raise StallscopeError(_no_libcupti(r.tried)[1])
        others = other_tools()
        if others:
            raise StallscopeError(
                "CUPTI capture not started, to leave another tool's data intact: "
                + "; ".join(others)
            )
        o = _options
        self._trace = trace
        self._totals: dict[str, int] = {}
        self._sessions = 0
        self._kinds: dict[str, Any] = {}
        cont = getattr(trace, "continuous", None)
        self.duty: Any = None
        if cont is not None and cont.device_every != 1:
            from stallscope.capture._device_duty import DeviceDuty

            self.duty = DeviceDuty(
                cont.device_every,
                cont.device_budget,
                self._session_start,
                self._session_stop,
                device_sync(),
                _core.set_step_hook_at,
            )
            state = getattr(trace, "continuous_state", None)
            if state is not None:
                state.attach_device(self.duty)
            _core.set_step_hook(self.duty.on_step, 1)
        else:
            self._kinds = self._session_start()
        # NVTX ranges reach CUPTI only when NVTX's injection points at the libcupti in use; NVTX
        # reads it once, at its first call in the process (so set it before NCCL/torch use NVTX).
        nvtx = os.environ.get("NVTX_INJECTION64_PATH")
        if o.markers and not nvtx:
            os.environ["NVTX_INJECTION64_PATH"] = r.path
            nvtx = r.path
            _set_env.append("NVTX_INJECTION64_PATH")
        out = {
            "library": r.path,
            "cupti_api_version": r.version,
            "clock": "stallscope process clock (cuptiActivityRegisterTimestampCallback)",
            **self._kinds,
            "nvtx_injection": nvtx,
            "buffer_bytes": o.buffer_bytes,
            "pool_limit_bytes": o.pool_limit_bytes,
            "external_correlation": {"CUSTOM0": "step index", "CUSTOM1": "region name"}
            if o.external_correlation
            else None,
        }
        if self.duty is not None:
            out["device_windows"] = "one step in device_every at most, and on-demand captures"
        return out

    def _session_start(self) -> dict[str, Any]:
        """Start CUPTI (one session: a whole trace, or one device window)."""
        o = _options
        flush_ms = int(getattr(self._trace, "flush_interval", 1.0) * 1000)
        res = _core.cupti_start(
            buffer_bytes=o.buffer_bytes,
            pool_limit_bytes=o.pool_limit_bytes,
            flush_period_ms=max(flush_ms, 1),
            device_buffer_bytes=o.device_buffer_bytes,
            runtime_api=o.runtime_api,
            markers=o.markers,
            overhead=o.overhead,
            external_correlation=o.external_correlation,
        )
        _last_start_error.clear()
        if not res["ok"]:
            _last_start_error.update(res)
            raise StallscopeError(f"CUPTI capture not started: {res['error']}")
        self._sessions += 1
        kinds = {"enabled": list(res["enabled"]), "refused": list(res["failed"])}
        if not self._kinds:
            self._kinds = kinds
        return kinds

    def _session_stop(self) -> None:
        """Stop CUPTI (forced flush, finalize), adding the session's counts to the trace's."""
        stats = _core.cupti_stop(finalize=_options.finalize)
        for k, v in stats.items():
            if not isinstance(v, int):
                continue
            if k in ("pool_peak_bytes", "distinct_kernel_names"):
                self._totals[k] = max(self._totals.get(k, 0), v)
            elif k in ("pool_bytes", "buffers_outstanding"):
                self._totals[k] = v  # a state, not a count
                if k == "buffers_outstanding" and v:
                    self._totals["buffers_lost"] = self._totals.get("buffers_lost", 0) + v
            else:
                self._totals[k] = self._totals.get(k, 0) + v

    def on_stop(self, trace: Any) -> dict[str, Any]:
        if self.duty is not None:
            _core.set_step_hook(None)
            self.duty.finish()
        if _core.cupti_active():
            self._session_stop()
        elif self.duty is None and not self._totals:  # stopped already (at exit, say)
            self._totals = {k: v for k, v in _core.cupti_stats().items() if isinstance(v, int)}
        while _set_env:  # processes started after the trace do not inherit the injection
            os.environ.pop(_set_env.pop(), None)
        stats = dict(self._totals)
        lost = stats.pop("buffers_lost", stats.get("buffers_outstanding", 0))
        meta: dict[str, Any] = {}
        if lost:
            # Our buffers completed to someone else's callback: another tool re-registered
            # CUPTI's activity callbacks while this trace ran; its records went to that tool.
            meta["warning"] = (
                f"{lost} CUPTI buffer(s) never came back: another tool "
                "(torch.profiler?) took over CUPTI's activity callbacks during the trace, so GPU "
                "records from then on are missing here"
            )
            warnings.warn(f"stallscope: {meta['warning']}", StallscopeWarning, stacklevel=2)
        if self.duty is not None:
            meta["duty"] = self.duty.stats() | {"sessions": self._sessions}
        return meta | {
            "stats": stats,
            "finalized": _options.finalize,
            "drops": {
                "cupti_dropped": stats.get("cupti_dropped", 0),
                "buffers_declined": stats.get("buffers_declined", 0),
                "incomplete_records": stats.get("incomplete", 0),
                "not_recorded": stats.get("events_not_recorded", 0),
                "unmatched_markers": stats.get("unmatched_markers", 0),
            },
        }


def device_sync() -> Callable[[], None] | None:
    """A wait for this process's GPU work, for the edges of device windows: torch's, when torch
    has initialised CUDA here (checked at each call: a job may initialise it after the trace
    starts); None without torch (windows are then not synchronised, run.json says so)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None

    def sync() -> None:
        t = sys.modules.get("torch")
        if t is not None and t.cuda.is_initialized():
            t.cuda.synchronize()

    return sync


BACKEND = CuptiBackend()


def _stop_at_exit() -> None:
    # Forced flush and finalize even when no trace stop ran (the trace's own exit hook usually
    # stops it first; this is idempotent).
    if _core.cupti_active():
        _core.cupti_stop(finalize=_options.finalize)


atexit.register(_stop_at_exit)
