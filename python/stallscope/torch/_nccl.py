"""Where the NCCL profiler plugin lives, and telling NCCL to load it (no torch import here)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

PLUGIN_NAME = "libnccl-profiler-stallscope.so"
PLUGIN_ENV = "NCCL_PROFILER_PLUGIN"


def plugin_path() -> Path:
    """The installed plugin: next to the native core (the package dir of the installed wheel)."""
    from stallscope import _core

    here = Path(_core.__file__ or "").parent / PLUGIN_NAME
    if here.exists():
        return here
    alt = Path(__file__).resolve().parent.parent / PLUGIN_NAME
    if alt.exists():
        return alt
    raise FileNotFoundError(
        f"{PLUGIN_NAME} is not installed next to {here.parent}: reinstall stallscope "
        "(pip install --no-build-isolation -e .) so CMake builds the plugin"
    )


def enable_plugin() -> str | None:
    """Point NCCL at the plugin (before NCCL creates its first communicator). Respects a plugin
    the user chose already (NCCL loads only one). Returns the path NCCL will use, or None."""
    current = os.environ.get(PLUGIN_ENV)
    if current and current != "none":
        return current
    if current == "none":
        return None
    try:
        path = str(plugin_path())
    except FileNotFoundError:
        return None
    os.environ[PLUGIN_ENV] = path
    return path


def _loaded_plugin() -> ctypes.CDLL | None:
    """The plugin if NCCL (or anything else) loaded it into this process, else None."""
    try:
        return ctypes.CDLL(str(plugin_path()), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except (OSError, FileNotFoundError):
        return None


def _stats(lib: ctypes.CDLL) -> dict[str, int]:
    out = (ctypes.c_int64 * 3)()
    lib.stallscope_nccl_stats(out)
    return {"recorded": int(out[0]), "lost": int(out[1]), "communicators": int(out[2])}


def plugin_stats() -> dict[str, int] | None:
    """The plugin's counters since it was loaded (recorded, lost: operations it could not
    record, communicators: live ones); None when it is not loaded in this process."""
    lib = _loaded_plugin()
    return None if lib is None else _stats(lib)


def flush_plugin() -> dict[str, int] | None:
    """Emit the operations the plugin still holds (call before the trace stops) and return its
    counters; None when the plugin is not loaded in this process."""
    lib = _loaded_plugin()
    if lib is None:
        return None
    lib.stallscope_nccl_flush.restype = ctypes.c_int
    lib.stallscope_nccl_flush()
    return _stats(lib)
