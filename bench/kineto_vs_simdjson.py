"""stallscope's Kineto scanner against simdjson, the fastest general JSON parser, on the same
text: how far the scan is from what a general parser needs for the same job.

Both read the gunzipped text from memory, one thread each (stallscope's scanner also with its
two threads), for each trace (default: the V100 and A100 16-rank traces):
  - simdjson `dom`: a full validating parse (every byte's grammar checked, as the scanner
    must), no field read;
  - simdjson `dom_fields`: that parse, then the fields the importer keeps from every event
    (ph, cat, name, pid, tid, ts, dur; args' External id, correlation, stream, device, bytes);
  - simdjson `ondemand_fields`: simdjson's lazy API reading those fields (it does not check
    every value it skips);
  - stallscope one thread / two threads: begin_file, feed in 1 MiB chunks, end_file (the
    columns, string dictionaries and row checks the importer uses).
Rounds alternate the order of the two tools; medians over every run of every round.

simdjson is not a dependency: this bench compiles bench/simdjson_fields.cc against the
system's library (Debian: `apt-get install libsimdjson-dev`) and stops, saying so, without it.

    python bench/kineto_vs_simdjson.py [--rounds 3] [--runs 7] [--out F.json] [TRACE ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kineto_scan_speed import TRACES, data_dir, load_core, scan_seconds  # beside this script

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "simdjson_fields.cc"
WAYS = ("dom", "dom_fields", "ondemand_fields")


def build(work: Path) -> Path:
    """simdjson_fields compiled into `work`, or exit naming the missing piece."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise SystemExit("kineto_vs_simdjson: no C++ compiler (g++) on PATH")
    exe = work / "simdjson_fields"
    cmd = [cxx, "-O3", "-std=c++17", str(PROGRAM), "-o", str(exe), "-lsimdjson"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(
            "kineto_vs_simdjson: cannot build against simdjson (Debian: apt-get install "
            f"libsimdjson-dev):\n{out.stderr.strip()[-800:]}"
        )
    return exe


def simdjson_runs(exe: Path, text: Path, runs: int) -> dict[str, Any]:
    out = subprocess.run([str(exe), str(text), str(runs)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"kineto_vs_simdjson: simdjson_fields failed: {out.stderr.strip()}")
    got: dict[str, Any] = json.loads(out.stdout)
    return got


def _ours(
    core: Any, chunks: list[bytes], size: int, runs: int, got: dict[str, list[float]]
) -> None:
    """stallscope's scanner, one thread then two: a warm-up scan, then `runs` timed."""
    for split, key in ((0, "stallscope_1"), (None, "stallscope_2")):
        scan_seconds(core, chunks, size, split)
        got[key] += [scan_seconds(core, chunks, size, split) for _ in range(runs)]


def _theirs(exe: Path, text: Path, runs: int, got: dict[str, list[float]]) -> str:
    """simdjson's ways, `runs` timed after one warm-up run; its kernel's name."""
    res = simdjson_runs(exe, text, runs + 1)
    for w in WAYS:
        got[w] += res[w][1:]
    return str(res["implementation"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", help="gzipped or plain trace files")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=7, help="runs per tool, trace and round")
    ap.add_argument("--out", default=str(HERE / "results" / "kineto_vs_simdjson.json"))
    args = ap.parse_args()
    core = load_core(None)
    paths = [Path(t) for t in args.traces] or [data_dir() / t for t in TRACES]
    with tempfile.TemporaryDirectory(prefix="kineto-vs-simdjson-") as tmp:
        work = Path(tmp)
        exe = build(work)
        texts: list[tuple[Path, Path, list[bytes], int]] = []
        for p in paths:
            raw = p.read_bytes()
            raw = gzip.decompress(raw) if p.name.endswith(".gz") else raw
            t = work / f"{len(texts)}.json"
            t.write_bytes(raw)
            chunks = [raw[i : i + (1 << 20)] for i in range(0, len(raw), 1 << 20)]
            texts.append((p, t, chunks, len(raw)))
            del raw
        times: dict[str, dict[str, list[float]]] = {
            str(p): {w: [] for w in (*WAYS, "stallscope_1", "stallscope_2")} for p, *_ in texts
        }
        impl = ""
        for r in range(args.rounds):
            for p, t, chunks, size in texts:
                got = times[str(p)]
                if r % 2 == 0:
                    _ours(core, chunks, size, args.runs, got)
                    impl = _theirs(exe, t, args.runs, got)
                else:
                    impl = _theirs(exe, t, args.runs, got)
                    _ours(core, chunks, size, args.runs, got)
                print(f"round {r} {p.parent.name}: done", file=sys.stderr)
    result: dict[str, Any] = {
        "machine": {
            "cpus": len(os.sched_getaffinity(0)),
            "platform": platform.platform(),
            "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "simdjson_implementation": impl,
        },
        "rounds": args.rounds,
        "runs_per_round": args.runs,
        "traces": {},
    }
    for p, _, _, size in texts:
        med = {k: statistics.median(v) for k, v in times[str(p)].items()}
        result["traces"][p.parent.name] = {
            "bytes": size,
            "median_ms": {k: round(v * 1e3, 2) for k, v in med.items()},
            "mb_per_s": {k: round(size / v / 1e6) for k, v in med.items()},
            "seconds": times[str(p)],
        }
        row = "  ".join(f"{k} {v * 1e3:.1f} ms" for k, v in med.items())
        print(f"{p.parent.name}: {size / 1e6:.1f} MB  {row}")
        one = med["stallscope_1"]
        print(
            f"  one stallscope thread vs simdjson: parse alone x{med['dom'] / one:.2f}, "
            f"parse + fields x{med['dom_fields'] / one:.2f}, on demand "
            f"x{med['ondemand_fields'] / one:.2f} (above 1: stallscope faster)"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"simdjson kernel: {impl}; wrote {out}")


if __name__ == "__main__":
    main()
