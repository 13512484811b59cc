"""Every ingestion path of the CUPTI backend, driven through the fake libcupti: kernels (names
demangled, classified by the shared classifier), copies, memsets, syncs, runtime calls, NVTX
markers, CUPTI overhead; one clock; forced flush and finalize at stop; what is enabled."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import stallscope
from stallscope.capture import _cupti
from stallscope.io._run_json import read_run_json
from tests.unit.cupti.conftest import Fake

NCCL_MANGLED = "_Z32ncclDevKernel_AllReduce_f32_RING24ncclDevKernelArgsStorageILm4096EE"
GEMM_NAME = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
GEMM_MANGLED = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"


def traced(tmp_path: Path, body: Any, **kw: Any) -> tuple[pl.DataFrame, dict[str, Any]]:
    run = tmp_path / "run"
    with stallscope.trace(run, backends=["cupti"], **kw):
        body()
    entry = next(iter(read_run_json(run)["processes"].values()))
    if not list(run.glob("rank-*.parquet")):
        return pl.DataFrame(schema=stallscope.SCHEMA), entry
    return stallscope.load(run), entry


def test_kernels_demangled_classified_on_one_clock(fake: Fake, tmp_path: Path) -> None:
    t: dict[str, int] = {}

    def body() -> None:
        t["before"] = stallscope.now_ns()
        fake.kernel(GEMM_MANGLED, stream=7)
        fake.kernel(NCCL_MANGLED, stream=13, driver=True)  # NCCL launches via cuLaunchKernelEx
        fake.kernel("_Z32ncclDevKernel_AllReduce_f32_RING24ncclDevKernelArgsStorageILm4096EE")
        fake.kernel("triton_poi_fused_add_0")  # extern "C" name: kept as is
        fake.kernel("_Zbroken")  # does not demangle: kept as is
        t["after"] = stallscope.now_ns()

    ev, entry = traced(tmp_path, body)
    k = ev.filter(pl.col("kind") == "kernel").sort("start_ns")
    assert k.height == 5
    names = set(k["name"])
    assert "ncclDevKernel_AllReduce_f32_RING(ncclDevKernelArgsStorage<4096ul>)" in names
    assert GEMM_NAME in names
    assert {"triton_poi_fused_add_0", "_Zbroken"} <= names
    cats = dict(zip(k["name"], k["category"], strict=True))
    assert cats["ncclDevKernel_AllReduce_f32_RING(ncclDevKernelArgsStorage<4096ul>)"] == "comm"
    assert cats["triton_poi_fused_add_0"] == "compute"
    # Interned once per distinct name: two NCCL launches, four distinct names.
    assert entry["backends"]["cupti"]["stats"]["distinct_kernel_names"] == 4
    # GPU fields: device, stream lane, CUPTI correlation id shared with the launch call.
    assert set(k["device"]) == {0}
    assert set(k["lane"]) >= {7, 13}
    rt = ev.filter(pl.col("kind") == "runtime")
    assert set(rt["name"]) == {"cudaLaunchKernel", "cuLaunchKernelEx"}
    assert set(rt["correlation"]) == set(k["correlation"])
    # One time base: the launch calls happened between two reads of stallscope's clock.
    assert rt["start_ns"].min() >= t["before"]
    assert rt["end_ns"].max() <= t["after"] + 3_000
    assert (k["start_ns"] >= rt["end_ns"].min()).all()
    assert entry["backends"]["cupti"]["clock"].startswith("stallscope process clock")


def test_copies_memsets_syncs_markers_overhead(fake: Fake, tmp_path: Path) -> None:
    def body() -> None:
        fake.memcpy(1, 2, 3, 1 << 20, 0, 7, 50_000)  # HtoD pinned -> device
        fake.memcpy(2, 3, 1, 4096, 0, 7, 5_000)  # DtoH device -> pageable
        fake.memcpy_p2p(0, 1, 8 << 20, 9, 80_000)
        fake.memset(65536, 0, 7, 2_000)
        fake.sync(3, 0, 7)  # cudaStreamSynchronize
        fake.sync(4, 0, 0)  # cudaDeviceSynchronize
        fake.sync(1, 0, 7)  # cudaEventSynchronize
        fake.nvtx_range(b"ncclAllReduce", b"NCCL", 30_000)
        fake.nvtx_mark(b"checkpoint")
        fake.overhead(1 << 16, 4_000)

    ev, entry = traced(tmp_path, body)
    cp = ev.filter(pl.col("kind") == "memcpy").sort("bytes")
    assert cp["name"].to_list() == [
        "Memcpy DtoH (Device -> Pageable)",
        "Memcpy HtoD (Pinned -> Device)",
        "Memcpy PtoP (Device -> Device)",
    ]
    assert cp["bytes"].to_list() == [4096, 1 << 20, 8 << 20]
    assert set(cp["category"]) == {"memcpy"}
    assert stallscope._schema.format_detail({"src_device": 0, "dst_device": 1}) in cp["detail"][2]
    ms = ev.filter(pl.col("kind") == "memset")
    assert ms["name"].to_list() == ["Memset (Device)"]
    assert ms["bytes"].to_list() == [65536]
    assert ms["category"].to_list() == ["memcpy"]
    sy = ev.filter(pl.col("kind") == "gpu_sync").sort("start_ns")
    assert sy["name"].to_list() == ["Stream Sync", "Context Sync", "Event Sync"]
    assert set(sy["category"]) == {"sync"}
    assert sy["lane"].to_list() == [7, -1, 7]
    assert set(sy["device"]) == {0}  # from the context -> device map of the copies
    # The stream sync lasted until the stream's queued work was done.
    assert sy["end_ns"][0] >= cp.filter(pl.col("bytes") == 4096)["end_ns"][0]
    rt = ev.filter(pl.col("kind") == "runtime")
    assert {
        "cudaMemcpyAsync",
        "cudaMemcpyPeerAsync",
        "cudaMemsetAsync",
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
    } == set(rt["name"])
    mk = ev.filter(pl.col("kind") == "marker").sort("start_ns")
    assert mk["name"].to_list() == ["ncclAllReduce", "checkpoint"]
    assert mk["end_ns"][0] - mk["start_ns"][0] == 30_000
    assert mk["detail"][0] == "domain=NCCL"
    assert mk["end_ns"][1] == mk["start_ns"][1]
    ov = ev.filter(pl.col("kind") == "overhead")
    assert ov["name"].to_list() == ["CUPTI buffer flush"]
    assert (ov["end_ns"] - ov["start_ns"]).to_list() == [4_000]
    s = entry["backends"]["cupti"]["stats"]
    assert (s["memcpys"], s["memsets"], s["syncs"], s["markers"], s["overheads"]) == (3, 1, 3, 3, 1)
    assert s["events"] == ev.filter(pl.col("kind") != "step").height


def test_enabled_kinds_and_timestamp_callback_first(fake: Fake, tmp_path: Path) -> None:
    enabled: dict[str, Any] = {}

    def body() -> None:
        for kind in (1, 2, 3, 5, 10, 12, 17, 22, 38, 39):
            enabled[kind] = fake.kind_enabled(kind)
        enabled["runtime_count"] = fake.runtime_enabled_count()
        enabled["launch"] = fake.runtime_enabled(211)
        enabled["malloc"] = fake.runtime_enabled(20)  # cudaMalloc: not a launch/copy/sync
        enabled["driver_launch"] = fake.driver_enabled(652)
        enabled["ts_first"] = fake.counter(5) == 0
        enabled["period"] = fake.counter(6)

    _, entry = traced(tmp_path, body, flush_interval=0.5)
    assert enabled[10], "CONCURRENT_KERNEL on"
    assert not enabled[3], "KERNEL (serialises kernels) off"
    for kind in (1, 2, 12, 17, 22, 38, 39):
        assert enabled[kind], kind
    assert not enabled[5], "the RUNTIME kind stays off: only chosen calls are enabled"
    assert enabled["launch"]
    assert enabled["driver_launch"]
    assert not enabled["malloc"]
    assert 20 <= enabled["runtime_count"] <= 40
    assert enabled["ts_first"], "timestamp callback registered before any kind was enabled"
    assert enabled["period"] == 500  # CUPTI's periodic flush follows the trace's flush interval
    meta = entry["backends"]["cupti"]
    assert "CONCURRENT_KERNEL" in meta["enabled"]
    assert meta["refused"] == []
    assert meta["library"] == str(fake.path)
    assert meta["nvtx_injection"] == str(fake.path)  # NVTX ranges can reach CUPTI
    assert not os.environ.get("NVTX_INJECTION64_PATH")  # removed again at stop
    # After stop: everything disabled, CUPTI finalized.
    assert not fake.kind_enabled(10)
    assert fake.runtime_enabled_count() == 0
    assert fake.finalized() == 1
    assert meta["finalized"] is True


def test_forced_flush_at_stop_and_finalize_option(fake: Fake, tmp_path: Path) -> None:
    _cupti.configure(finalize=False)

    def body() -> None:
        for i in range(50):  # stays in partially filled buffers: only a forced flush returns them
            fake.kernel(GEMM_MANGLED, stream=i % 3)

    ev, entry = traced(tmp_path, body)
    assert ev.filter(pl.col("kind") == "kernel").height == 50
    assert fake.counter(2) >= 1, "a forced flush ran at stop"
    assert fake.finalized() == 0
    assert entry["backends"]["cupti"]["finalized"] is False


def test_buffers_delivered_while_running(fake: Fake, tmp_path: Path) -> None:
    _cupti.configure(buffer_bytes=8192)  # ~37 kernel records per buffer

    def body() -> None:
        for _ in range(300):
            fake.kernel(GEMM_MANGLED)

    ev, entry = traced(tmp_path, body)
    s = entry["backends"]["cupti"]["stats"]
    assert ev.filter(pl.col("kind") == "kernel").height == 300
    assert s["buffers_completed"] >= 8
    assert s["buffers_declined"] == 0
    assert s["pool_peak_bytes"] <= _cupti.DEFAULT_POOL_LIMIT_BYTES
    assert s["pool_bytes"] == 0, "buffers freed after stop"


def test_second_trace_in_same_process(fake: Fake, tmp_path: Path) -> None:
    for i in range(2):
        run = tmp_path / f"run{i}"
        with stallscope.trace(run, backends=["cupti"]):
            fake.kernel(GEMM_MANGLED)
        assert stallscope.load(run).filter(pl.col("kind") == "kernel").height == 1
    assert fake.finalized() == 2


def test_configure_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="unknown CUPTI option"):
        _cupti.configure(buffer_size=1)
    with pytest.raises(ValueError, match="pool_limit_bytes"):
        _cupti.configure(buffer_bytes=1 << 20, pool_limit_bytes=1 << 10)
