"""Speed of the streaming Kineto scanner alone (_core.KinetoScanner): MB/s of JSON text.

Each trace is gunzipped beforehand and cut into 1 MiB text chunks (about what the importer's
gunzip thread hands over); only begin_file / feed / end_file are timed, so this measures the
scan, not decompression, Polars or Python. Medians of --runs scans per trace (one untimed scan
first warms the dictionaries, caches and page tables, as a later file of one import would).

    python bench/kineto_scan_speed.py [--runs 9] [--core path/to/_core.so] [--json] [TRACE ...]

--core loads another build of the extension (e.g. an older one) instead of the installed one,
so two builds can be compared from one script in separate processes. Run it under
`flock /tmp/stallscope-bench.lock` on a shared machine; steal (hypervisor) shows as spread.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACES = [
    "hta_v100_rank1_of2_large/df_index_resolver.json.gz",
    "hta_a100_rank0_of16/rank0.json.gz",
]
CHUNK = 1 << 20  # bytes of text per feed()


def data_dir() -> Path:
    """The repository's Kineto traces (kineto_vs_hta.default_data), or exit naming the fix."""
    from kineto_vs_hta import default_data  # beside this script: on sys.path

    found = default_data()
    if found is None:
        raise SystemExit("no tests/data/kineto in the checkout: name the trace files")
    return found


def load_core(path: str | None) -> Any:
    if path is None:
        from stallscope import _core

        return _core
    # The module's init symbol is PyInit__core whatever the file is called.
    spec = importlib.util.spec_from_file_location("_core", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def text_chunks(path: Path) -> list[bytes]:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return [raw[i : i + CHUNK] for i in range(0, len(raw), CHUNK)]


def scan_seconds(core: Any, chunks: list[bytes], size: int, split_min: int | None = None) -> float:
    """One scan of the text's chunks; split_min 0: one thread (None: the scanner's default, two
    threads on two or more cores)."""
    sc = core.KinetoScanner() if split_min is None else core.KinetoScanner(split_min)
    t0 = time.perf_counter()
    sc.begin_file(size)
    for c in chunks:
        if not sc.feed(c):
            raise SystemExit("scanner declined the trace")
    res = sc.end_file()
    secs = time.perf_counter() - t0
    if isinstance(res, str):
        raise SystemExit(f"scanner declined the trace: {res}")
    return secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", help="trace files (default: the V100 and A100 traces)")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--core", help="path of a _core extension to load instead of stallscope's")
    ap.add_argument("--json", action="store_true", help="one JSON line of raw times per trace")
    args = ap.parse_args()
    core = load_core(args.core)
    paths = [Path(t) for t in args.traces] or [data_dir() / t for t in TRACES]
    for p in paths:
        chunks = text_chunks(p)
        size = sum(len(c) for c in chunks)
        scan_seconds(core, chunks, size)  # warm-up
        times = [scan_seconds(core, chunks, size) for _ in range(args.runs)]
        med = statistics.median(times)
        if args.json:
            print(json.dumps({"trace": str(p), "bytes": size, "seconds": times}))
        else:
            print(
                f"{p.parent.name}/{p.name}: {size / 1e6:.1f} MB text, median {med * 1e3:.1f} ms"
                f" = {size / med / 1e6:.0f} MB/s ({args.runs} runs,"
                f" min {min(times) * 1e3:.1f} max {max(times) * 1e3:.1f} ms)"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
