"""Importing a folder of rank files on a machine of many cores: one scanner for all files (the
path of machines with 2-3 cores) against files read side by side, a scanner each (4+ cores).

Folders: the multi-file sets of tests/data/kineto, and a synthetic 8-rank folder (one base
trace, the V100 one when present, written once per rank with its distributedInfo rank). Each
mode runs as a fresh child, interleaved, `--rounds` times; the import alone is timed (the files
read and converted; views and stall table do not change between the modes). Medians.

On fewer than 4 cores there is nothing to compare (the side-by-side read is not used there):
the script says so and exits 0, as the GPU checks do without a GPU.

    python bench/kineto_rank_folders.py [--rounds 5] [--ranks 8] [--base TRACE.json.gz]
        [--out bench/results/kineto_rank_folders.json]

The results file records the machine's core count; the synthetic folder is named
`synthetic_<ranks>_ranks`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import kineto_vs_hta as kvh  # noqa: E402  (beside this script)

MODES = ("one_scanner", "side_by_side")


def child(mode: str, folder: str) -> dict[str, float]:
    import warnings

    import stallscope
    from stallscope.io.kineto import _native_read

    warnings.simplefilter("ignore")
    if mode == "one_scanner":
        _native_read._SIDE_BY_SIDE_CORES = 1 << 30  # type: ignore[misc]
    kvh._settle()
    t0 = time.perf_counter()
    ev = stallscope.import_kineto(folder)
    return {"seconds": time.perf_counter() - t0, "rows": float(ev.height)}


def _rank_folder(base: Path, ranks: int, into: Path) -> Path:
    """`ranks` copies of `base`, each with its own distributedInfo rank, in a new folder."""
    import orjson

    into = into / f"synthetic_{ranks}_ranks"
    into.mkdir()
    doc = orjson.loads(gzip.decompress(base.read_bytes()))
    for r in range(ranks):
        doc["distributedInfo"] = {**(doc.get("distributedInfo") or {}), "rank": r}
        doc["distributedInfo"]["world_size"] = ranks
        (into / f"rank{r}.json.gz").write_bytes(gzip.compress(orjson.dumps(doc), 6))
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=2, metavar=("MODE", "FOLDER"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--base", type=Path, default=None, help="the trace copied once per rank")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child)))
        return
    cores = len(os.sched_getaffinity(0))
    if cores < 4:
        print(f"{cores} cores: the side-by-side read needs 4 or more; nothing to compare here")
        return
    data = kvh.default_data()
    base = a.base
    if base is None and data is not None:
        base = data / "hta_v100_rank1_of2_large" / "df_index_resolver.json.gz"
    if base is None or not base.is_file():
        base = kvh.DATA / "h200_transformer_1rank" / "h200_transformer_rank0.pt.trace.json.gz"
    folders: list[Path] = []
    if data is not None:
        folders += [p for p in kvh.trace_sets(data) if len(list(p.iterdir())) > 1]
    with tempfile.TemporaryDirectory() as tmp:
        folders.append(_rank_folder(base, a.ranks, Path(tmp)))
        runs: dict[str, dict[str, list[float]]] = {f.name: {m: [] for m in MODES} for f in folders}
        for r in range(a.rounds):
            for f in folders:
                for mode in MODES if r % 2 == 0 else reversed(MODES):
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", mode, str(f)],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    secs = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
                    runs[f.name][mode].append(secs)
                    print(
                        f"round {r} {f.name:28s} {mode:13s} {secs * 1e3:8.1f} ms", file=sys.stderr
                    )
    table = {name: {m: statistics.median(v) for m, v in by.items()} for name, by in runs.items()}
    result = {
        "cores": cores,
        "base_trace": str(base),
        "ranks": a.ranks,
        "rounds": a.rounds,
        "median_seconds": table,
        "runs": runs,
        "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    out_path = a.out or HERE / "results" / "kineto_rank_folders.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    for name, t in table.items():
        print(
            f"{name:28s} one scanner {t['one_scanner'] * 1e3:8.1f} ms   side by side "
            f"{t['side_by_side'] * 1e3:8.1f} ms   x{t['one_scanner'] / t['side_by_side']:.2f}"
        )


if __name__ == "__main__":
    main()
