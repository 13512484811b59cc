"""What a fresh process pays on top of stallscope's Kineto work (`kineto_vs_hta.py`'s timed work:
import + the four HTA views + the stall table), per trace set, measured by taking each cost away
in turn. Each mode runs as a fresh child, interleaved (the order rotates every round); medians
per set over the rounds, summed over the sets.

- fresh: as `kineto_vs_hta.py` times it (after the imports, once their threads are idle).
- code_warm: the same work first runs once on the repository's small H200 trace, so the code it
  runs (Python's, NumPy's, Polars', the extension's) has run before; fresh - code_warm is the
  first use of that code.
- no_fresh_pages: glibc keeps freed memory (MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ /
  MALLOC_ARENA_MAX=1) and the child touches and frees 128 MiB first, so the work's malloc'd memory
  is already mapped; fresh - no_fresh_pages is what fresh pages cost it (Polars' own allocator
  excepted). An upper bound for any reuse of memory inside the import.
- steady: the work runs three times untimed on the same set, then the fourth is timed: the
  per-set cost once nothing about the process is new.

The modes other than fresh are measurements, not ways to run stallscope: they move costs out of
the timed region rather than remove them. A run is bracketed by the noise guard and reports the
cores the rest of the machine used in each round, as `kineto_vs_hta.py` does.

    python bench/kineto_fresh_costs.py [--rounds 5] [--data tests/data/kineto]
        [--out bench/results/kineto_fresh_costs.json]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import kineto_vs_hta as kvh  # noqa: E402  (beside this script)

MODES = ("fresh", "code_warm", "no_fresh_pages", "steady")
SMALL_TRACE = ROOT / "tests" / "data" / "kineto" / "h200_transformer_1rank"
PREFAULT_MIB = 128
# glibc keeps what is freed in its heap (no mmap per large block, no trim), one arena.
KEEP_PAGES_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 31),
    "MALLOC_ARENA_MAX": "1",
}


def _touch_and_free(mib: int) -> None:
    """malloc, write and free `mib` MiB through glibc (kept mapped under KEEP_PAGES_ENV)."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    p = libc.malloc(mib << 20)
    if not p:
        raise MemoryError(f"malloc of {mib} MiB failed")
    ctypes.memset(p, 1, mib << 20)
    libc.free(p)


def child(mode: str, trace_dir: str) -> dict[str, float]:
    import warnings

    import stallscope.analysis  # noqa: F401  (the imports, before the timing)
    from stallscope import _core  # noqa: F401

    warnings.simplefilter("ignore")
    if mode == "code_warm":
        kvh.stallscope_work(str(SMALL_TRACE))
    elif mode == "no_fresh_pages":
        _touch_and_free(PREFAULT_MIB)
    elif mode == "steady":
        for _ in range(3):
            kvh.stallscope_work(trace_dir)
            gc.collect()
    gc.collect()
    kvh._settle()
    w = kvh.stallscope_work(trace_dir)
    return {"seconds": w["import"] + w["views"] + w["stall"], "faults": w["faults"]}


def _run(mode: str, trace_dir: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if mode == "no_fresh_pages":
        env.update(KEEP_PAGES_ENV)
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(trace_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{mode} on {trace_dir} failed ({out.returncode}): {out.stderr[-2000:]}")
    res: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def _hta_total() -> float | None:
    """HTA's summed seconds in the committed headline run (for the 50x line), None if absent."""
    p = HERE / "results" / "kineto_vs_hta.json"
    try:
        return float(json.loads(p.read_text())["total"]["hta_s"])
    except (OSError, KeyError, ValueError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=2, metavar=("MODE", "TRACE_DIR"))
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "kineto_fresh_costs.json")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child)))
        return
    data = a.data or kvh.default_data()
    if data is None:
        ap.error("no trace folder found: pass --data (the folder of trace sets)")
    if not SMALL_TRACE.is_dir():
        ap.error(f"{SMALL_TRACE} is missing (the code_warm mode's trace)")
    sets = kvh.trace_sets(data)
    from _guard import check
    from stallscope.comm._neighbour import cpu_sample

    guards = [check("before")]
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        s.name: {m: [] for m in MODES} for s in sets
    }
    during: list[dict[str, Any]] = []
    for r in range(a.rounds):
        before = cpu_sample()
        order = MODES[r % len(MODES) :] + MODES[: r % len(MODES)]
        for s in sets:
            for mode in order:
                res = _run(mode, s)
                runs[s.name][mode].append(res)
                print(
                    f"round {r} {s.name:28s} {mode:15s} {res['seconds'] * 1e3:7.1f} ms "
                    f"{res['faults']:6.0f} faults",
                    file=sys.stderr,
                )
        o = kvh.round_others(r, before)
        if o is not None:
            during.append(o)
    guards.append(check("after"))
    per_set = {
        name: {
            m: {k: statistics.median(x[k] for x in v) for k in ("seconds", "faults")}
            for m, v in by.items()
        }
        for name, by in runs.items()
    }
    total = {m: sum(t[m]["seconds"] for t in per_set.values()) for m in MODES}
    faults = {m: sum(t[m]["faults"] for t in per_set.values()) for m in MODES}
    hta = _hta_total()
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        },
        "rounds": a.rounds,
        "noise_guard": guards,
        "others_during_rounds": during,
        "valid": all(g["quiet"] for g in guards) and all(o["ok"] for o in during),
        "per_set": per_set,
        "total_seconds": total,
        "total_faults": faults,
        "costs_seconds": {
            "first_use_of_code": total["fresh"] - total["code_warm"],
            "fresh_pages": total["fresh"] - total["no_fresh_pages"],
            "all_of_a_fresh_process": total["fresh"] - total["steady"],
        },
        "hta_seconds_of_headline": hta,
        "runs": runs,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, t in per_set.items():
        print(
            f"{name:28s} "
            + "  ".join(
                f"{m} {t[m]['seconds'] * 1e3:6.1f} ms ({t[m]['faults']:.0f})" for m in MODES
            )
        )
    print("total: " + "  ".join(f"{m} {total[m] * 1e3:6.1f} ms" for m in MODES))
    for k, v in result["costs_seconds"].items():
        print(f"  {k}: {v * 1e3:.1f} ms")
    if hta is not None:
        print(
            "  against the headline's HTA "
            + ", ".join(f"{m} x{hta / total[m]:.1f}" for m in MODES)
            + f"; 50x needs {hta / 50 * 1e3:.1f} ms"
        )
    print("valid" if result["valid"] else "NOISY: discard this run")


if __name__ == "__main__":
    main()
