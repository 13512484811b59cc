"""The newest Kineto writer the project has a trace of: torch 2.11 on an NVIDIA H200 (CUDA 13.0),
tests/data/kineto/h200_transformer_1rank. It imports without a problem, as the file says, the
native scanner reads it itself and exactly as the general reader does, and its stall table
adds up."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import stallscope
from stallscope.analysis import STALL_COLUMNS, stall_table
from stallscope.io.kineto import _native_read

SET = Path(__file__).resolve().parents[2] / "data" / "kineto" / "h200_transformer_1rank"
(TRACE,) = SET.glob("*.json.gz")


def _read(reader: str, monkeypatch: pytest.MonkeyPatch) -> stallscope.KinetoImport:
    monkeypatch.setenv("STALLSCOPE_KINETO_READER", reader)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not one problem
        return stallscope.read_kineto(SET)


def test_h200_trace_imports_as_the_file_says(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    in_file: dict[str, int] = {}
    for e in raw:
        if e.get("ph") == "X":
            in_file[e.get("cat")] = in_file.get(e.get("cat"), 0) + 1
    imp = _read("auto", monkeypatch)
    assert list(imp.ranks) == [0]
    assert [d.get("name") for d in imp.ranks[0].device_properties] == ["NVIDIA H200"]
    kinds = dict(imp.events.group_by("kind").len().iter_rows())
    assert kinds["kernel"] == in_file["kernel"] == 246
    assert kinds["memcpy"] == in_file["gpu_memcpy"]
    assert kinds["memset"] == in_file["gpu_memset"]
    assert kinds["runtime"] == in_file["cuda_runtime"] + in_file["cuda_driver"]
    steps = imp.events.filter(pl.col("kind") == "step").sort("start_ns")
    assert steps["name"].to_list() == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    gpu = imp.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu["device"].unique().to_list() == [0]


def test_h200_trace_native_equals_general(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _native_read.Session().read(TRACE) is not None  # no fallback to the general reader
    native, general = _read("auto", monkeypatch), _read("general", monkeypatch)
    assert_frame_equal(native.events, general.events)
    assert native.ranks == general.ranks


def test_h200_stall_table_adds_up_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    table = stall_table(_read("auto", monkeypatch).events)
    assert table["step"].to_list() == [2, 3, 4]
    total = table.select(pl.sum_horizontal(STALL_COLUMNS)).to_series()
    assert (total == table["step_ns"]).all()
    # One transformer block a step: GPU work in every step, no communication on one GPU.
    assert (table["compute_ns"] > 0).all()
    assert (table["sync_wait_ns"] + table["network_ns"] + table["interconnect_ns"] == 0).all()
