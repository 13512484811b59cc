"""Random event sequences survive rings -> Parquet -> Polars unchanged."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stallscope
from stallscope import _core
from stallscope._schema import CATEGORIES, KIND_ID, KINDS

NAMES = [
    "forward",
    "backward",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "Memcpy HtoD",
    "ünï ✓",
    "",
]
DETAILS = [None, "group=pg0;nnodes=2", "a=1"]

event = st.fixed_dictionaries(
    {
        "kind": st.sampled_from([k for k in KINDS if k != "counter"]) | st.just("counter"),
        "category": st.sampled_from(CATEGORIES),
        "name": st.sampled_from(NAMES),
        "start_ns": st.integers(0, 2**62),
        "dur": st.integers(0, 10**12),
        "lane": st.integers(-(2**31), 2**31 - 1),
        "device": st.integers(-1, 2**15 - 1),
        "correlation": st.integers(-(2**63), 2**63 - 1),
        "bytes": st.integers(0, 2**63 - 1),
        "value": st.floats(allow_nan=False, width=64),
        "detail": st.sampled_from(DETAILS),
    }
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=st.lists(event, min_size=0, max_size=300))
def test_events_round_trip_unchanged(
    tmp_path_factory: object, events: list[dict[str, object]]
) -> None:
    out = Path(tmp_path_factory.mktemp("rt"))
    n = len(events)
    is_counter = np.array([e["kind"] == "counter" for e in events], dtype=bool)
    bytes_ = np.array(
        [
            struct.unpack("<q", struct.pack("<d", e["value"]))[0]
            if e["kind"] == "counter"
            else e["bytes"]
            for e in events
        ],
        dtype=np.int64,
    )
    with stallscope.trace(out, flush_interval=0.05, rank=0, world_size=1):
        accepted = _core.record_columns(
            np.array([e["start_ns"] for e in events], dtype=np.int64),
            np.array([int(e["start_ns"]) + int(e["dur"]) for e in events], dtype=np.int64),  # type: ignore[call-overload]
            np.array([e["correlation"] for e in events], dtype=np.int64),
            bytes_,
            np.array([_core.intern(str(e["name"])) for e in events], dtype=np.uint32),
            np.array(
                [0 if e["detail"] is None else _core.intern(str(e["detail"])) for e in events],
                dtype=np.uint32,
            ),
            np.array([e["lane"] for e in events], dtype=np.int32),
            np.array([e["device"] for e in events], dtype=np.int16),
            np.array([KIND_ID[str(e["kind"])] for e in events], dtype=np.uint8),
            np.array([CATEGORIES.index(str(e["category"])) for e in events], dtype=np.uint8),
        )
        assert accepted == n
    if n == 0:
        assert not list(out.glob("rank-*.parquet"))
        return
    got = stallscope.load(out, align_clocks=False)
    expected = pl.DataFrame(
        {
            "kind": [e["kind"] for e in events],
            "category": [e["category"] for e in events],
            "name": [e["name"] for e in events],
            "start_ns": [e["start_ns"] for e in events],
            "end_ns": [int(e["start_ns"]) + int(e["dur"]) for e in events],  # type: ignore[call-overload]
            "lane": [e["lane"] for e in events],
            "device": [e["device"] for e in events],
            "correlation": [e["correlation"] for e in events],
            "bytes": [0 if c else b for c, b in zip(is_counter, bytes_.tolist(), strict=True)],
            "value": [e["value"] if e["kind"] == "counter" else None for e in events],
            "detail": [e["detail"] for e in events],
        },
        schema_overrides={k: got.schema[k] for k in ("kind", "category", "lane", "device")},
    )
    assert got.select(expected.columns).equals(expected)
    assert (got["rank"] == 0).all()
