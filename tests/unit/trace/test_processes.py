"""What happens to a trace across fork(), SIGKILL and SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import stallscope


def _child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the child")


def test_fork_child_starts_empty_and_never_writes_parent_file(tmp_path: Path) -> None:
    with stallscope.trace(tmp_path) as t:
        stallscope.mark("parent-before-fork")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: not tracing; marks are dropped, nothing written
            try:
                os.close(r)
                stallscope.mark("child-untraced")
                ok = stallscope.active() is None and not stallscope._core.recording()
                with stallscope.trace(tmp_path) as ct:  # a traced child writes its own file
                    stallscope.mark("child-traced")
                ok = ok and ct.path is not None and ".pid-" in ct.path.name
                os.write(w, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(w)
        child_ok = os.read(r, 1)
        os.close(r)
        os.waitpid(pid, 0)
        stallscope.mark("parent-after-fork")
    assert child_ok == b"1"
    parent = pl.read_parquet(t.path)
    assert parent["name"].to_list() == ["parent-before-fork", "parent-after-fork"]
    (child_file,) = tmp_path.glob("rank-00000.pid-*.parquet")
    assert pl.read_parquet(child_file)["name"].to_list() == ["child-traced"]
    both = stallscope.load(tmp_path)
    assert sorted(both["name"].to_list()) == [
        "child-traced",
        "parent-after-fork",
        "parent-before-fork",
    ]


KILL_CHILD = """
    import sys, time, stallscope
    from stallscope import _core
    name = _core.intern("tick")
    with stallscope.trace(sys.argv[1], flush_interval=0.25):
        i = 0
        print("started", flush=True)
        while True:  # the parent kills us
            t = _core.now_ns()
            _core.record(1, 0, name, t, t, correlation=i)
            i += 1
            time.sleep(0.001)
"""


def test_sigkill_loses_at_most_the_last_flush_interval(tmp_path: Path) -> None:
    p = _child(KILL_CHILD, str(tmp_path))
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "started"
        _wait_for(lambda: len(list(tmp_path.glob("rank-00000.part-*.parquet"))) >= 4)
        killed_at = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock the child records on
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        p.kill()
    parts = sorted(tmp_path.glob("rank-00000.part-*.parquet"))
    for part in parts:  # every flushed file is complete and readable
        pq.read_metadata(part)
    assert not (tmp_path / "rank-00000.parquet").exists()
    with pytest.warns(stallscope.StallscopeWarning, match="never stopped"):
        ev = stallscope.load(tmp_path)
    ticks = ev.filter(pl.col("name") == "tick")
    seq = ticks["correlation"].to_list()
    assert seq == list(range(len(seq))), "the flushed events are a gap-free prefix"
    lost_ns = killed_at - ticks["start_ns"].max()  # type: ignore[operator]
    # One flush interval (0.25 s), plus scheduling slack on a loaded 2-core machine.
    assert lost_ns < 0.25e9 + 0.5e9, f"lost {lost_ns / 1e9:.2f} s of events"


TERM_CHILD = """
    import sys, time, stallscope
    with stallscope.trace(sys.argv[1], flush_interval=60):
        for i in range(1000):
            stallscope.mark("m")
        print("ready", flush=True)
        time.sleep(60)
"""


def test_sigterm_flushes_everything_then_terminates(tmp_path: Path) -> None:
    p = _child(TERM_CHILD, str(tmp_path))
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    finally:
        p.kill()
    assert rc == -signal.SIGTERM, "the process must still die of SIGTERM"
    assert (tmp_path / "rank-00000.parquet").exists()
    assert not list(tmp_path.glob("*.part-*.parquet"))
    ev = stallscope.load(tmp_path)
    assert ev.filter(pl.col("name") == "m").height == 1000
    assert stallscope.run_info(tmp_path).processes["rank-00000"]["status"] == "stopped"


def test_normal_exit_without_stop_flushes(tmp_path: Path) -> None:
    p = _child(
        """
        import sys, stallscope
        stallscope.start(sys.argv[1], flush_interval=60)
        for i in range(500):
            stallscope.mark("m")
        """,
        str(tmp_path),
    )
    assert p.wait(timeout=60) == 0
    assert stallscope.load(tmp_path).filter(pl.col("name") == "m").height == 500
