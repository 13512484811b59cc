"""Every record that does not become an event is counted, and reported in run.json under
backends.cupti: declined buffers (pool exhausted), CUPTI's own dropped count, incomplete and
unknown records, unmatched NVTX ends, events the rings refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import stallscope
from stallscope.capture import _cupti
from stallscope.exceptions import StallscopeWarning
from stallscope.io._run_json import read_run_json
from tests.unit.cupti.conftest import Fake

K = "_Z6kernelv"


def run_entry(run: Path) -> dict[str, Any]:
    entry: dict[str, Any] = next(iter(read_run_json(run)["processes"].values()))
    return entry


def test_pool_exhausted_declines_and_counts(fake: Fake, tmp_path: Path) -> None:
    # One 4 KiB buffer in the pool: the host records (launch calls) hold it, so every request
    # for a device buffer (kernel records) is declined and CUPTI drops those records.
    _cupti.configure(buffer_bytes=4096, pool_limit_bytes=4096)
    run = tmp_path / "run"
    with stallscope.trace(run, backends=["cupti"]):
        for _ in range(20):
            fake.kernel(K)
    # The user is told, naming the cause and the setting to raise.
    with pytest.warns(
        StallscopeWarning, match=r"40 events dropped.*buffers_declined 20.*pool_limit_bytes"
    ):
        ev = stallscope.load(run)
    assert ev.filter(pl.col("kind") == "kernel").height == 0
    assert ev.filter(pl.col("kind") == "runtime").height == 20
    meta = run_entry(run)["backends"]["cupti"]
    assert meta["stats"]["buffers_declined"] == 20 == fake.counter(3)
    assert meta["drops"]["buffers_declined"] == 20
    assert meta["drops"]["cupti_dropped"] == 20  # CUPTI counted the records it could not store
    assert meta["stats"]["pool_peak_bytes"] == 4096


def test_incomplete_unknown_and_dropped_records(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run, backends=["cupti"]):
        fake.untimed_kernel(K.encode(), 7)  # 0 timestamps: no timing was collected
        fake.kernel(K)
        fake.unknown_record()  # a kind stallscope does not read: skipped, parsing goes on
        fake.nvtx_mark(b"kept")
        fake.nvtx_orphan_end()  # an END whose START was never seen
        fake.incomplete_record()  # invalid record: the rest of this buffer is unreadable
        fake.nvtx_mark(b"lost")
        fake.add_dropped(7)
    with pytest.warns(StallscopeWarning, match=r"10 events dropped while tracing") as seen:
        ev = stallscope.load(run)
    said = str(seen[0].message)
    for what in ("cupti_dropped 7", "incomplete_records 2", "unmatched_markers 1"):
        assert what in said
    assert ev.filter(pl.col("kind") == "kernel").height == 1
    assert ev.filter(pl.col("kind") == "marker")["name"].to_list() == ["kept"]
    d = run_entry(run)["backends"]["cupti"]
    assert d["stats"]["incomplete"] == 2
    assert d["drops"]["incomplete_records"] == 2
    assert d["stats"]["unknown_kind"] == 1
    assert d["drops"]["unmatched_markers"] == 1
    assert d["drops"]["cupti_dropped"] == 7


def test_a_drop_left_from_the_previous_session_is_not_this_traces(
    fake: Fake, tmp_path: Path
) -> None:
    # CUPTI's count is reset on read; a record dropped after the previous session's last read
    # (in its cuptiFinalize: one, on an H200) waits in it. The next trace reports it apart.
    fake.add_dropped(1)
    run = tmp_path / "run"
    with stallscope.trace(run, backends=["cupti"]):
        fake.kernel(K)
    d = run_entry(run)["backends"]["cupti"]
    assert d["drops"]["cupti_dropped"] == 0
    assert d["stats"]["cupti_dropped_before"] == 1
    assert stallscope.run_info(run).problems == []
    with stallscope.trace(tmp_path / "next", backends=["cupti"]):  # nothing left over now
        fake.add_dropped(2)
    d = run_entry(tmp_path / "next")["backends"]["cupti"]
    assert (d["drops"]["cupti_dropped"], d["stats"]["cupti_dropped_before"]) == (2, 0)


RING_SCRIPT = """
import ctypes, json, sys
import stallscope
from stallscope.io._run_json import read_run_json
fake = ctypes.CDLL(sys.argv[2])
fake.fake_cupti_launch_kernel.restype = ctypes.c_uint32
fake.fake_cupti_launch_kernel.argtypes = [ctypes.c_char_p] + [ctypes.c_uint32] * 2 + [
    ctypes.c_uint64] * 3 + [ctypes.c_int]
with stallscope.trace(sys.argv[1], backends=["cupti"], ring_capacity=16):
    for _ in range(200):  # one buffer of 200 kernels parsed at once into a 16-event ring
        fake.fake_cupti_launch_kernel(b"_Z6kernelv", 0, 7, 1000, 1000, 1000, 0)
print(json.dumps(next(iter(read_run_json(__import__("pathlib").Path(sys.argv[1]))["processes"].values()))))
"""


def test_full_ring_drops_are_counted_not_fatal(fake_lib: Path, tmp_path: Path) -> None:
    # A fresh process, so the ring pool is configured with 16-event rings.
    run = tmp_path / "run"
    env = {**os.environ, _cupti.ENV_LIBRARY: str(fake_lib)}
    out = subprocess.run(
        [sys.executable, "-c", RING_SCRIPT, str(run), str(fake_lib)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    entry = json.loads(out.stdout.strip().splitlines()[-1])
    s = entry["backends"]["cupti"]["stats"]
    assert s["kernels"] == 200
    assert s["events_not_recorded"] > 0
    assert s["events"] + s["events_not_recorded"] == 400  # kernels + launch calls
    with pytest.warns(StallscopeWarning, match="dropped while tracing"):
        assert stallscope.load(run).filter(pl.col("kind") == "kernel").height < 200
    assert entry["drops"]["ring_full"] >= s["events_not_recorded"]
