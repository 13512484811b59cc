"""Kineto import and tables beside a busy Python thread: the switch-interval hand-off
(`stallscope._utils.gil`) against CPython's default, on the real trace sets.

A thread that runs Python bytecode without pause (a training loop beside an analysis thread,
say) holds the GIL until CPython asks it to let go, after the switch interval (5 ms by
default). stallscope's work returns from native code into the interpreter hundreds of times per
call, and each return waits for the GIL. Per trace set, in one process each (warm: one untimed
run first), `--rounds` rounds of: the work alone, the work with a busy thread with stallscope's
hand-offs (the default), and the same with them turned off (the interval left at 5 ms), each
after an untimed run alone. Work =
import + the four HTA views + the stall table, each timed; medians. Also the busy thread's
pace (loop turns per second) while the work runs, against its pace alone.

    python bench/kineto_busy_thread.py [--rounds 5] [--out bench/results/kineto_busy_thread.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kineto_vs_hta as kvh  # noqa: E402  (beside this script)

MODES = ("alone", "busy_fair", "busy_default")


class _Spinner:
    """A thread running Python bytecode without pause until stopped; `turns` counts its loops."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self.turns = 0
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
        self.turns = n

    def __enter__(self) -> _Spinner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _spin_rate(seconds: float) -> float:
    """Turns per second of the busy loop alone."""
    with _Spinner() as s:
        time.sleep(seconds)
    return s.turns / seconds


def child(trace_dir: str, rounds: int) -> dict[str, Any]:
    import warnings

    from stallscope._utils import gil as _gil

    warnings.simplefilter("ignore")
    solo_rate = _spin_rate(0.2)
    kvh.stallscope_work(trace_dir)  # warm
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    pace: dict[str, list[float]] = {m: [] for m in MODES[1:]}
    for _ in range(rounds):
        for mode in MODES:
            # The run right after a busy one was up to 2x slower (caches, freed memory):
            # each timed run follows an untimed one alone.
            kvh.stallscope_work(trace_dir)
            _gil.SWITCH_S = 1e-4 if mode != "busy_default" else 1.0  # type: ignore[misc]
            if mode == "alone":
                w = kvh.stallscope_work(trace_dir)
            else:
                with _Spinner() as spinner:
                    time.sleep(0.02)  # the loop running before the work starts
                    t0 = time.perf_counter()
                    w = kvh.stallscope_work(trace_dir)
                    secs = time.perf_counter() - t0
                pace[mode].append(spinner.turns / (secs + 0.02) / solo_rate)
            runs[mode].append(w["import"] + w["views"] + w["stall"])
    return {"runs": runs, "busy_thread_pace": pace}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=2, metavar=("TRACE_DIR", "ROUNDS"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "kineto_busy_thread.json")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], int(a.child[1]))))
        return
    data = a.data or kvh.default_data()
    if data is None:
        sys.exit("no trace data: pass --data tests/data/kineto")
    sets = kvh.trace_sets(data)
    result: dict[str, Any] = {
        "machine": {
            "cpus": len(__import__("os").sched_getaffinity(0)),
            "python": platform.python_version(),
        },
        "rounds": a.rounds,
        "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "per_set": {},
    }
    for s in sets:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(s), str(a.rounds)],
            capture_output=True,
            text=True,
            check=True,
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        med = {m: statistics.median(v) for m, v in got["runs"].items()}
        pace = {m: statistics.median(v) for m, v in got["busy_thread_pace"].items()}
        result["per_set"][s.name] = {
            "median_seconds": med,
            "busy_thread_pace_median": pace,
            "runs": got["runs"],
            "busy_thread_pace": got["busy_thread_pace"],
        }
        print(
            f"{s.name:28s} alone {med['alone'] * 1e3:7.1f} ms   busy thread: with hand-offs "
            f"{med['busy_fair'] * 1e3:7.1f} ms (its pace {pace['busy_fair']:.2f}), CPython's "
            f"default {med['busy_default'] * 1e3:8.1f} ms (its pace {pace['busy_default']:.2f})"
        )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
