"""stallscope's heavy calls shorten the interpreter's switch interval while they run (so that a
busy Python thread beside them does not make each return from native code wait 5 ms), and
leave the process's own setting as they found it: restored after, on errors too, by the last
of several overlapping calls in any thread, and never over a setting someone made meanwhile."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

import stallscope
from stallscope._utils import gil as _gil
from stallscope._utils.gil import SWITCH_S, fair_gil
from stallscope.io import _perfetto


@pytest.fixture(autouse=True)
def interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # CPython's default
    yield
    sys.setswitchinterval(before)


def _close(a: float, b: float) -> bool:
    return abs(a - b) < 1e-7  # CPython keeps the interval in whole µs


def test_the_interval_is_short_inside_and_restored_after() -> None:
    seen: list[float] = []

    @fair_gil
    def work(x: int) -> int:
        seen.append(sys.getswitchinterval())
        return x + 1

    assert work(1) == 2
    assert _close(seen[0], SWITCH_S)
    assert _close(sys.getswitchinterval(), 0.005)
    sys.setswitchinterval(0.02)  # a process's own setting comes back too
    work(1)
    assert _close(sys.getswitchinterval(), 0.02)


def test_a_shorter_interval_is_left_alone() -> None:
    sys.setswitchinterval(SWITCH_S / 2)
    seen: list[float] = []
    fair_gil(lambda: seen.append(sys.getswitchinterval()))()
    assert _close(seen[0], SWITCH_S / 2)
    assert _close(sys.getswitchinterval(), SWITCH_S / 2)


def test_restored_when_the_call_raises() -> None:
    @fair_gil
    def broken() -> None:
        raise ValueError("bad trace")

    with pytest.raises(ValueError, match="bad trace"):
        broken()
    assert _close(sys.getswitchinterval(), 0.005)
    assert _gil._active == 0


def test_a_setting_made_during_the_call_is_kept() -> None:
    @fair_gil
    def work() -> None:
        sys.setswitchinterval(0.001)

    work()
    assert _close(sys.getswitchinterval(), 0.001)


def test_overlapping_calls_in_two_threads_restore_once_the_last_returns() -> None:
    # A's call starts first and returns first: B's call, still running, keeps the short
    # interval; B's return restores the one A found.
    a_in, b_in, a_may_return, b_may_return = (threading.Event() for _ in range(4))
    seen: dict[str, float] = {}
    errors: list[BaseException] = []

    @fair_gil
    def call(name: str, inside: threading.Event, may_return: threading.Event) -> None:
        inside.set()
        assert may_return.wait(10)
        seen[name] = sys.getswitchinterval()

    def run(name: str, inside: threading.Event, may_return: threading.Event) -> None:
        try:
            call(name, inside, may_return)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    a = threading.Thread(target=run, args=("a", a_in, a_may_return))
    b = threading.Thread(target=run, args=("b", b_in, b_may_return))
    a.start()
    assert a_in.wait(10)
    b.start()
    assert b_in.wait(10)
    a_may_return.set()
    a.join(10)
    assert _close(sys.getswitchinterval(), SWITCH_S)  # B still runs
    b_may_return.set()
    b.join(10)
    assert not errors
    assert _close(seen["a"], SWITCH_S) and _close(seen["b"], SWITCH_S)
    assert _close(sys.getswitchinterval(), 0.005)


PUBLIC = [
    stallscope.import_kineto,
    stallscope.read_kineto,
    stallscope.load,
    stallscope.analysis.stall_table,
    stallscope.analysis.stall_intervals,
    stallscope.analysis.stall_summary,
    stallscope.analysis.stall_run_summary,
    stallscope.analysis.temporal_breakdown,
    stallscope.analysis.idle_time_breakdown,
    stallscope.analysis.kernel_breakdown,
    stallscope.analysis.kernel_type_breakdown,
    stallscope.analysis.comm_comp_overlap,
    stallscope.analysis.launch_stats,
    stallscope.analysis.launch_stats_summary,
    stallscope.analysis.queue_length,
    stallscope.analysis.queue_length_summary,
    stallscope.analysis.match_collectives,
    stallscope.analysis.stragglers,
    stallscope.analysis.step_windows,
    stallscope.analysis.assign_steps,
    stallscope.analysis.capture_summary,
    _perfetto.perfetto_json,  # `stallscope export`
    _perfetto.write_perfetto,
]


@pytest.mark.parametrize("fn", PUBLIC, ids=lambda f: f.__name__)
def test_every_heavy_entry_point_is_wrapped(fn: object) -> None:
    # The ones that read traces or compute tables: a busy thread beside any of them made its
    # returns from native code wait (the V100 trace's stall table: 3 ms -> 0.3 s).
    assert getattr(fn, "__wrapped__", None) is not None
