"""Fuzzing the importer: any JSON a profiler (or a broken disk) could leave gives an event-schema
frame, a TraceImportError or a StallscopeWarning, never another exception.

~200 cases in the default run; 10,000 in the slow tier."""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stallscope
from stallscope import StallscopeWarning, TraceImportError
from stallscope._schema import SCHEMA

CATS = [
    "kernel",
    "Kernel",
    "gpu_memcpy",
    "Memcpy",
    "gpu_memset",
    "cuda_runtime",
    "cuda_driver",
    "Runtime",
    "cpu_op",
    "Operator",
    "user_annotation",
    "gpu_user_annotation",
    "cuda_sync",
    "python_function",
    "ac2g",
    "async_cpu_to_gpu",
    "Trace",
    "weird",
    "",
]
NAMES = [
    "ProfilerStep#3",
    "ProfilerStep # 12",
    "ncclDevKernel_AllReduce_Sum_f32",
    "Memcpy HtoD",
    "Memset (Device)",
    "Stream Sync",
    "Event Sync",
    "cudaLaunchKernel",
    "record_param_comms",
    "gemm",
    "a;b=c",
    "",
]

scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
number = st.one_of(st.integers(-(10**17), 10**17), st.floats(-1e17, 1e17, allow_nan=False), scalar)
args = st.one_of(
    st.none(),
    scalar,
    st.lists(scalar, max_size=2),
    st.fixed_dictionaries(
        {},
        optional={
            "stream": number,
            "correlation": number,
            "device": number,
            "bytes": number,
            "External id": number,
            "Collective name": st.sampled_from(["allreduce", "send", "wait"]),
            "Group size": number,
            "In msg nelems": number,
            "dtype": st.sampled_from(["Float", "x"]),
            "Process Group Name": scalar,
            "Process Group Ranks": st.one_of(scalar, st.lists(st.integers(0, 3))),
            "cuda_sync_kind": scalar,
        },
    ),
)
event_object = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "s", "f", "i", "M", "C", "B", 3]),
        "cat": st.one_of(st.sampled_from(CATS), scalar),
        "name": st.one_of(st.sampled_from(NAMES), scalar),
        "pid": number,
        "tid": number,
        "ts": number,
        "dur": number,
        "id": number,
        "bp": st.just("e"),
        "args": args,
    },
)
event = st.one_of(scalar, event_object)
document = st.one_of(
    st.fixed_dictionaries(
        {"traceEvents": st.lists(event, max_size=12)},
        optional={
            "distributedInfo": st.one_of(
                scalar,
                st.fixed_dictionaries(
                    {},
                    optional={
                        "rank": number,
                        "world_size": number,
                        "pg_config": st.lists(scalar, max_size=2),
                    },
                ),
            ),
            "deviceProperties": st.one_of(
                scalar,
                st.lists(st.dictionaries(st.sampled_from(["id", "name"]), scalar), max_size=2),
            ),
            "baseTimeNanoseconds": number,
        },
    ),
    st.fixed_dictionaries({}, optional={"traceEvents": scalar}),
    st.lists(scalar, max_size=3),
)


def _check(doc: Any, truncate: int) -> None:
    raw = json.dumps(doc).encode()
    if truncate:
        raw = raw[: max(0, len(raw) - truncate)]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "trace.json"
        p.write_bytes(raw)
        with warnings.catch_warnings():
            warnings.simplefilter("error", StallscopeWarning)
            try:
                ev = stallscope.import_kineto(p)
            except (TraceImportError, StallscopeWarning):
                return
        assert dict(ev.schema) == SCHEMA
        assert (ev["end_ns"] >= ev["start_ns"]).all()


_fast = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
_slow = settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))


@_fast
@given(doc=document, truncate=st.sampled_from([0, 0, 0, 1, 7]))
def test_fuzz_importer(doc: Any, truncate: int) -> None:
    _check(doc, truncate)


@pytest.mark.slow
@_slow
@given(doc=document, truncate=st.sampled_from([0, 0, 0, 1, 7]))
def test_fuzz_importer_10k(doc: Any, truncate: int) -> None:
    _check(doc, truncate)
