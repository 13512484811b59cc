"""External correlation: step() and regions push ids while CUPTI runs, so every kernel, copy and
sync names the step and innermost region that launched it; launch delay and per-stream queue
depth are derivable (`_cupti.launches`); nothing is pushed when CUPTI is off."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import polars as pl

import stallscope
from stallscope._schema import parse_detail
from stallscope.capture import _cupti
from tests.unit.cupti.conftest import Fake

CUSTOM0, CUSTOM1 = 3, 4  # CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 / CUSTOM1
K = "_Z6kernelv"  # demangles to kernel()


def test_steps_and_regions_attribute_gpu_work(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"
    depth: dict[str, tuple[int, int]] = {}
    fwd = stallscope.region("forward", "compute")
    with stallscope.trace(run, backends=["cupti"]):
        fake.kernel(K)  # before the first step: no step, no region
        for _ in range(3):
            stallscope.step()
            with fwd:
                fake.kernel(K)
                with stallscope.region("attention"):
                    fake.kernel(K)
                    depth["inner"] = fake.ext_depth(CUSTOM1)
                fake.memcpy(1, 2, 3, 4096, 0, 7, 1000)
            with stallscope.region("backward"):
                fake.memset(512, 0, 7, 1000)
                fake.sync(3, 0, 7)
            depth["after_regions"] = fake.ext_depth(CUSTOM1)
        depth["step"] = fake.ext_depth(CUSTOM0)
    depth["after_stop"] = fake.ext_depth(CUSTOM0)
    ev = stallscope.load(run)
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset", "gpu_sync"])).with_columns(
        step=parse_detail(pl.col("detail"), "step", pl.Int64()),
        region=parse_detail(pl.col("detail"), "region"),
    )
    per = gpu.group_by("step", "region", "kind").len().sort("step", "region", "kind")
    rows = set(per.iter_rows())
    for s in (1, 2, 3):
        assert {
            (s, "forward", "kernel", 1),
            (s, "attention", "kernel", 1),
            (s, "forward", "memcpy", 1),
            (s, "backward", "memset", 1),
            (s, "backward", "gpu_sync", 1),
        } <= rows
    assert (None, None, "kernel", 1) in rows  # launched before the first step
    # The runtime launch call carries the same attribution.
    rt = ev.filter(pl.col("kind") == "runtime").with_columns(
        step=parse_detail(pl.col("detail"), "step", pl.Int64())
    )
    assert rt.filter(pl.col("step") == 2).height == 5
    # Stacks balanced: innermost region on top while nested, empty after; one step id pushed,
    # popped at stop.
    assert depth["inner"] == (2, stallscope._core.intern("attention"))
    assert depth["after_regions"] == (0, 0)
    assert depth["step"] == (1, 3)
    assert depth["after_stop"][0] == 0


def test_launch_delay_and_queue_depth(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with stallscope.trace(run, backends=["cupti"]):
        stallscope.step()
        # Four 50 ms kernels launched back to back on stream 7: each waits for the previous one
        # (the fake's launches are stamped with the real clock: kernels far longer than a loop
        # turn of a loaded machine keep the queue whatever the load)
        for _ in range(4):
            fake.kernel(K, stream=7, api_ns=2_000, delay_ns=4_000, duration_ns=50_000_000)
        fake.kernel(K, stream=9, api_ns=2_000, delay_ns=6_000, duration_ns=10_000)
    lt = stallscope.analysis.launches(stallscope.load(run))
    s7 = lt.filter(pl.col("lane") == 7).sort("launch_end_ns")
    assert s7.height == 4
    assert s7["launch_delay_ns"][0] == 4_000
    # Later kernels queue behind the first: their delay grows by about one kernel each.
    d = s7["launch_delay_ns"].to_list()
    assert all(b - a > 45_000_000 for a, b in itertools.pairwise(d))
    assert s7["queue_depth"].to_list() == [1, 2, 3, 4]
    s9 = lt.filter(pl.col("lane") == 9)
    assert s9["queue_depth"].to_list() == [1]
    assert s9["launch_delay_ns"].to_list() == [6_000]
    assert set(lt["step"]) == {1}


def test_other_threads_keep_their_own_attribution(fake: Fake, tmp_path: Path) -> None:
    run = tmp_path / "run"

    tids: dict[str, int] = {}

    def worker() -> None:
        tids["worker"] = threading.get_native_id()
        with stallscope.region("loader_thread"):
            fake.kernel(K, stream=3)

    with stallscope.trace(run, backends=["cupti"]):
        stallscope.step()
        with stallscope.region("main_region"):
            t = threading.Thread(target=worker)
            t.start()
            t.join()
            fake.kernel(K, stream=1)
    ev = stallscope.load(run)
    k = ev.filter(pl.col("kind") == "kernel").sort("lane")
    assert k["detail"].to_list() == ["step=1;region=main_region", "region=loader_thread"]
    # The other thread never called step(): its launch is placed by the host step window.
    lt = stallscope.analysis.launches(ev).sort("lane")
    assert lt["step"].to_list() == [1, 1]
    # Launch calls sit on the OS thread that made them (CUPTI names threads by pthread_self).
    rt = ev.filter(pl.col("kind") == "runtime").sort("correlation")
    assert rt["lane"].to_list() == [tids["worker"], threading.get_native_id()]
    assert lt["region"].to_list() == ["main_region", "loader_thread"]


def test_cpu_only_hot_path_pushes_nothing(fake: Fake, tmp_path: Path) -> None:
    # No CUPTI session: regions and steps never reach CUPTI.
    with stallscope.trace(tmp_path / "run", backends=()):
        stallscope.step()
        with stallscope.region("r"):
            assert fake.ext_depth(CUSTOM1) == (0, 0)
        assert fake.ext_depth(CUSTOM0) == (0, 0)
    # A region entered before CUPTI started is not popped by its exit.
    r = stallscope.region("outer")
    r.__enter__()
    with stallscope.trace(tmp_path / "run2", backends=["cupti"]):
        with stallscope.region("inner"):
            assert fake.ext_depth(CUSTOM1)[0] == 1
        r.__exit__(None, None, None)
        assert fake.ext_depth(CUSTOM1) == (0, 0)
        assert stallscope._core.cupti_stats()["ext_push_errors"] == 0


def test_fork_child_has_cupti_off(fake: Fake, tmp_path: Path) -> None:
    import os

    with stallscope.trace(tmp_path / "run", backends=["cupti"]):
        pid = os.fork()
        if pid == 0:  # child: the backend is off (its steps and regions push nothing)
            code = 0
            try:
                if stallscope._core.cupti_active():
                    code = 2
                with stallscope.region("child"):
                    stallscope.step()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert stallscope._core.cupti_active()


def test_without_runtime_records_steps_come_from_gpu_time(fake: Fake, tmp_path: Path) -> None:
    _cupti.configure(runtime_api=False, external_correlation=False)
    run = tmp_path / "run"
    with stallscope.trace(run, backends=["cupti"]):
        assert fake.runtime_enabled_count() == 0
        for _ in range(2):
            stallscope.step()
            fake.kernel(K, delay_ns=1_000, duration_ns=1_000)
            fake.sync(4, 0, 0)  # the step waits for its kernel
    ev = stallscope.load(run)
    assert ev.filter(pl.col("kind") == "runtime").height == 0
    assert ev.filter(pl.col("kind") == "kernel")["detail"].to_list() == [None, None]
    lt = stallscope.analysis.launches(ev).sort("start_ns")
    assert lt["launch_end_ns"].to_list() == [None, None]
    assert lt["queue_depth"].to_list() == [None, None]
    assert lt["step"].to_list() == [1, 2]  # by the GPU start time, in the host step windows
