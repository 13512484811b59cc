"""Capture-core micro-benchmarks. Run: python bench/core_capture.py

Measures, medians over repeats, on this machine:
- record cost from C++ (one ring push, timestamps given; and with a clock read),
- region enter+exit from Python (a kept region object; and a one-shot region("x")), beside an
  empty pure-Python context manager timed in the same loops (the floor any Python-level
  region pays on this interpreter, so the ratio holds on a slower or busier machine),
- drain throughput (rings -> NumPy columns),
- Parquet write throughput (columns -> event-schema frame -> zstd Parquet file),
- memory per buffered event (resident bytes added per event held in the rings).
Writes bench/results/core_capture.json.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

from stallscope import _core
from stallscope.capture._writer import StringCache, chunk_to_table
from stallscope.io._event_files import write_atomic

RESULTS = Path(__file__).parent / "results"
REPEATS = 7


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fresh_pool(threads: int, capacity: int) -> None:
    _core.set_recording(False)
    _core.configure(threads, capacity)
    _core.discard()
    _core.reset_stats()
    _core.set_recording(True)


def record_cost(n: int = 2_000_000) -> dict[str, float]:
    out: dict[str, list[float]] = {"push_ns": [], "push_with_clock_ns": []}
    _fresh_pool(8, 1 << 21)
    for _ in range(REPEATS):
        for key, clock in (("push_ns", False), ("push_with_clock_ns", True)):
            _core.discard()
            elapsed, accepted = _core.stress_record(1, n, read_clock=clock)
            assert accepted == [n], "ring too small: drops would skew the timing"
            out[key].append(elapsed[0] / n)
    _core.set_recording(False)
    t = [
        timeit.timeit("f()", globals={"f": _core.now_ns}, number=200_000) / 200_000 * 1e9
        for _ in range(REPEATS)
    ]
    return {k: statistics.median(v) for k, v in out.items()} | {
        "clock_read_from_python_ns": statistics.median(t)
    }


class _EmptyContext:
    """The cheapest context manager Python code can write: the floor of any region API."""

    def __enter__(self) -> _EmptyContext:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def region_cost(n: int = 300_000) -> dict[str, float]:
    import stallscope

    _fresh_pool(8, 1 << 21)
    r = stallscope.region("bench", category="compute")
    cm = _EmptyContext()
    kept, oneshot, empty, plain = [], [], [], []
    for _ in range(REPEATS):
        _core.discard()
        empty.append(timeit.timeit("for _ in rng: pass", globals={"rng": range(n)}, number=1) / n)
        _core.discard()
        kept.append(
            timeit.timeit(
                "for _ in rng:\n  with r: pass", globals={"rng": range(n), "r": r}, number=1
            )
            / n
        )
        plain.append(
            timeit.timeit(
                "for _ in rng:\n  with cm: pass", globals={"rng": range(n), "cm": cm}, number=1
            )
            / n
        )
        _core.discard()
        oneshot.append(
            timeit.timeit(
                "for _ in rng:\n  with region('bench'): pass",
                globals={"rng": range(n), "region": stallscope.region},
                number=1,
            )
            / n
        )
    _core.set_recording(False)
    loop = statistics.median(empty) * 1e9
    region_ns = statistics.median(kept) * 1e9 - loop
    plain_ns = statistics.median(plain) * 1e9 - loop
    return {
        "region_enter_exit_ns": region_ns,
        "region_oneshot_ns": statistics.median(oneshot) * 1e9 - loop,
        "empty_python_context_ns": plain_ns,
        "region_over_empty_python_context": region_ns / plain_ns,
        "python_loop_iteration_ns": loop,
    }


def drain_and_write(n: int = 4_000_000) -> dict[str, float]:
    drain_rate, write_rate, convert_rate, write_cpu_rate = [], [], [], []
    name = _core.intern("kernel-name")
    _fresh_pool(8, 1 << 20)
    strings = StringCache()
    with tempfile.TemporaryDirectory() as d:
        for _ in range(5):
            _core.discard()
            _core.stress_record(4, n // 4, name_id=name, read_clock=True)
            t0 = time.perf_counter()
            cols = _core.drain()
            t1 = time.perf_counter()
            assert len(cols["start_ns"]) == n
            df = chunk_to_table(cols, 0, 1, strings)
            t2 = time.perf_counter()
            c2 = time.process_time()
            write_atomic(df, Path(d) / "x.parquet")
            c3 = time.process_time()
            t3 = time.perf_counter()
            drain_rate.append(n / (t1 - t0))
            convert_rate.append(n / (t2 - t1))
            write_rate.append(n / (t3 - t2))
            write_cpu_rate.append(n / (c3 - c2))
    _core.set_recording(False)
    return {
        "drain_events_per_s": statistics.median(drain_rate),
        "to_frame_events_per_s": statistics.median(convert_rate),
        "parquet_write_events_per_s": statistics.median(write_rate),
        "parquet_write_events_per_cpu_s": statistics.median(write_cpu_rate),
    }


def memory_per_event(n: int = 4_000_000) -> dict[str, float]:
    _core.set_recording(False)
    _core.configure(4 + 1, 1 << 20)  # a new pool: its pages are untouched until written
    _core.discard()
    _core.set_recording(True)
    before = _rss_bytes()
    _core.stress_record(4, n // 4, read_clock=False)
    after = _rss_bytes()
    _core.set_recording(False)
    assert _core.buffered() == n
    _core.discard()
    return {
        "bytes_per_buffered_event": (after - before) / n,
        "record_size_bytes": float(_core.RECORD_SIZE),
    }


def main() -> None:
    res: dict[str, object] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "processor": platform.processor(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repeats": REPEATS,
    }
    res |= record_cost()
    res |= region_cost()
    res |= drain_and_write()
    res |= memory_per_event()
    targets = {
        "push_ns": ("<=", 20.0),
        "region_enter_exit_ns": ("<=", 300.0),
        "drain_events_per_s": (">=", 20e6),
        "parquet_write_events_per_s": (">=", 5e6),
        "bytes_per_buffered_event": ("<=", 48.0),
    }
    res["targets_met"] = {
        k: (round(float(res[k]), 1) <= v) if op == "<=" else (round(float(res[k]), 1) >= v)  # type: ignore[arg-type]
        for k, (op, v) in targets.items()
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "core_capture.json").write_text(json.dumps(res, indent=2) + "\n")
    for k, v in res.items():
        print(f"{k:32s} {v:,.1f}" if isinstance(v, float) else f"{k:32s} {v}")


if __name__ == "__main__":
    main()
