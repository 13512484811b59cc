"""stallscope: where each training step's time goes, and what another cluster would do.

Capture::

    import stallscope
    with stallscope.trace("runs/exp1"):
        for batch in stallscope.loader(data):
            stallscope.step()
            with stallscope.region("forward", category="compute"):
                ...

Read back::

    events = stallscope.load("runs/exp1")   # polars.DataFrame, every rank, event schema
"""

from __future__ import annotations

__version__ = "0.1.0"

import os as _os

from stallscope import _core

# Lets backends outside this extension (the NCCL profiler plugin) attach to this very core.
_os.environ.setdefault("STALLSCOPE_CORE_LIBRARY", _core.__file__ or "")

from stallscope import analysis, data
from stallscope._schema import CATEGORIES, KINDS, SCHEMA
from stallscope.analysis import stall_summary, stall_table
from stallscope.capture._api import counter, loader, mark, region, step
from stallscope.capture._backends import backends
from stallscope.capture._trace import Trace, active, start, stop, trace
from stallscope.exceptions import (
    EventsError,
    RunDirError,
    StallscopeError,
    StallscopeWarning,
    TraceError,
    TraceImportError,
)
from stallscope.io._load import RunInfo, load, run_info, scan
from stallscope.io._summary_load import load_summary
from stallscope.io.kineto import KinetoImport, import_kineto, read_kineto

now_ns = _core.now_ns

__all__ = [
    "CATEGORIES",
    "KINDS",
    "SCHEMA",
    "EventsError",
    "KinetoImport",
    "RunDirError",
    "RunInfo",
    "StallscopeError",
    "StallscopeWarning",
    "Trace",
    "TraceError",
    "TraceImportError",
    "__version__",
    "active",
    "analysis",
    "backends",
    "counter",
    "data",
    "import_kineto",
    "load",
    "load_summary",
    "loader",
    "mark",
    "now_ns",
    "read_kineto",
    "region",
    "run_info",
    "scan",
    "stall_summary",
    "stall_table",
    "start",
    "step",
    "stop",
    "trace",
]
