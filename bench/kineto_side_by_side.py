"""Two versions of stallscope side by side on the work `kineto_vs_hta.py` times (Kineto import,
the four HTA views, the stall table), per phase, in fresh processes, interleaved.

A change's effect cannot be read off two headline runs: HTA's time, and ours, move with the
window (HTA's summed time has ranged 8.1-12.2 s on this VM). So each version is built from its
git revision into a folder of its own (`pip install --target`, the extension included), and
each round runs both on every trace set, one fresh process each, alternating which goes first.
Reported per set and summed over the sets: the median of each phase per version, and the
median over rounds of the paired difference (head - base, the two runs of a round back to
back). The children time their work after their imports' threads are idle (`_settle`, as the
headline bench). A round counts as quiet when the rest of the machine (other processes and
hypervisor steal, /proc/stat) used at most OTHERS_LIMIT cores; the summary says how many were.

    python bench/kineto_side_by_side.py BASE [HEAD] [--rounds 9] [--sets a,b]
        [--out bench/results/kineto_side_by_side.json]

BASE and HEAD are git revisions of this repository; HEAD may also be `installed`, the
stallscope this interpreter imports (an editable install: the working tree). Each round runs a
fresh copy of each build's folder (`--same-files`: each build's own folder every round):
identical extension files were seen to run 25-30 % apart on the project's VM, depending on where
the copy's pages sit, so one set of files can decide a comparison on its own
(docs/performance-notes.md, "Measuring"). Building needs
scikit-build-core and pybind11 in this interpreter (`pip install scikit-build-core pybind11`);
builds are kept under --work (default /tmp/stallscope-side-by-side/<commit>) and reused.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PHASES = ("import", "views", "stall", "all")  # "all" last: the sum of the others
INSTALLED = "installed"


def _fail(msg: str) -> NoReturn:
    print(f"kineto_side_by_side: {msg}", file=sys.stderr)
    sys.exit(2)


def _commit(rev: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        _fail(f"{rev!r} is not a revision of {ROOT} (git rev-parse: {out.stderr.strip()})")
    return out.stdout.strip()


def build(rev: str, work: Path) -> Path:
    """The folder holding stallscope built from `rev` (built on first use)."""
    commit = _commit(rev)
    home = work / commit[:12]
    target = home / "t"
    if (target / "stallscope").is_dir():
        return target
    for mod in ("scikit_build_core", "pybind11"):
        if importlib.util.find_spec(mod) is None:
            _fail(f"building {rev} needs {mod}: pip install scikit-build-core pybind11")
    shutil.rmtree(home, ignore_errors=True)
    (home / "src").mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(home / "src")], input=archive.stdout, check=True)
    print(f"building {rev} ({commit[:12]}) into {target}", file=sys.stderr)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps"]
    cmd += ["--target", str(target), str(home / "src"), "-C", f"build-dir={home / 'build'}"]
    if subprocess.run(cmd).returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        _fail(f"building {rev} failed (the pip output above says why)")
    return target


def _fresh_copy(target: str, dest: Path) -> str:
    """A new copy of a build's folder, so that its files get new page-cache pages. On this
    project's VM two files of the same bytes ran the scan 25-30 % apart, each the same way run
    after run (the extension's pages in the page cache are where its code executes from):
    one copy per round spreads that over the rounds instead of charging it to one version.
    The working tree's editable install is one set of files: compare revisions for that."""
    if target == INSTALLED:
        return target
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(target, dest, copy_function=shutil.copy)
    return str(dest)


def child(target: str, trace_dir: str) -> dict[str, Any]:
    """One timed run, in this fresh process, of the stallscope at `target`."""
    if target != INSTALLED:  # that build, not the editable install of the working tree
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, target)
    import warnings

    import stallscope
    import stallscope.analysis  # the imports, before the wait and the timing
    from stallscope import _core  # noqa: F401

    if target != INSTALLED and not stallscope.__file__.startswith(target):
        raise RuntimeError(f"imported {stallscope.__file__}, not the build in {target}")
    from kineto_vs_hta import _settle, stallscope_work  # beside this script: on sys.path

    warnings.simplefilter("ignore")
    _settle()
    work = stallscope_work(trace_dir)
    ms = {ph: work[ph] * 1e3 for ph in PHASES[:-1]}
    return {
        **ms,
        "all": sum(ms.values()),
        "import_faults": work["import_faults"],
        "faults": work["faults"],
    }


def _run(target: str, trace_dir: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", target, str(trace_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if out.returncode != 0:
        raise RuntimeError(f"{target} on {trace_dir} failed:\n{out.stderr[-2000:]}")
    res: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def summarize(
    runs: dict[str, dict[str, list[dict[str, float]]]], quiet: list[bool]
) -> dict[str, Any]:
    """Per set and summed: each phase's median per arm and the median paired difference."""
    per_set: dict[str, Any] = {}
    for name, by in runs.items():
        per_set[name] = {
            ph: {
                "base_ms": statistics.median(x[ph] for x in by["base"]),
                "head_ms": statistics.median(x[ph] for x in by["head"]),
                "paired_diff_ms": statistics.median(
                    h[ph] - b[ph] for b, h in zip(by["base"], by["head"], strict=True)
                ),
            }
            for ph in (*PHASES, "import_faults", "faults")
        }
    total = {
        ph: {k: sum(s[ph][k] for s in per_set.values()) for k in ("base_ms", "head_ms")}
        for ph in PHASES
    }
    for ph in PHASES:  # paired per round over the summed sets, then the median over rounds
        total[ph]["paired_diff_ms"] = statistics.median(
            sum(by["head"][r][ph] - by["base"][r][ph] for by in runs.values())
            for r in range(len(quiet))
        )
    return {"per_set": per_set, "total": total, "quiet_rounds": sum(quiet), "rounds": len(quiet)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", nargs=2, metavar=("TARGET", "TRACE_DIR"), help=argparse.SUPPRESS)
    ap.add_argument("base", nargs="?", help="git revision of the code before")
    ap.add_argument("head", nargs="?", default=INSTALLED, help="git revision or 'installed'")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--sets", default="", help="comma-separated trace sets (default: all)")
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--work", type=Path, default=Path("/tmp/stallscope-side-by-side"))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "kineto_side_by_side.json")
    ap.add_argument(
        "--same-files",
        action="store_true",
        help="run each build from its one folder every round (see the module docstring)",
    )
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child)))
        return
    if a.base is None:
        ap.error("BASE is required: the git revision of the code before")
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    from kineto_vs_hta import OTHERS_LIMIT, default_data, trace_sets

    data = a.data or default_data()
    if data is None or not data.is_dir():
        _fail("no trace folder: pass --data (the folder of trace sets, one folder each)")
    sets = trace_sets(data)
    if a.sets:
        wanted = a.sets.split(",")
        unknown = sorted(set(wanted) - {p.name for p in sets})
        if unknown:
            _fail(f"unknown trace sets {unknown}; there are {[p.name for p in sets]}")
        sets = [p for p in sets if p.name in wanted]
    arms = {
        "base": str(build(a.base, a.work)),
        "head": INSTALLED if a.head == INSTALLED else str(build(a.head, a.work)),
    }
    builds = dict(arms)
    from stallscope.comm._neighbour import cpu_sample, others_during

    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        s.name: {"base": [], "head": []} for s in sets
    }
    quiet: list[bool] = []
    # One untimed run per version first: the first run after a build was 15-20 ms slower on
    # the 10 k set (its files' first reads), which round 0 would charge to BASE.
    for target in arms.values():
        _run(target, sets[0])
    for r in range(a.rounds):
        if not a.same_files:
            arms = {arm: _fresh_copy(t, a.work / f"round-{arm}") for arm, t in builds.items()}
        before = cpu_sample()
        for s in sets:
            for arm in ("base", "head") if r % 2 == 0 else ("head", "base"):
                runs[s.name][arm].append(_run(arms[arm], s))
        after = cpu_sample()
        ok = True
        if before is not None and after is not None:
            o = others_during(before, after, limit=OTHERS_LIMIT)
            ok = o.ok
            print(
                f"round {r}: others {o.others_cores:.2f} + steal {o.steal_cores:.2f} cores"
                f" -> {'quiet' if ok else 'noisy'}",
                file=sys.stderr,
            )
        quiet.append(ok)
    res = summarize(runs, quiet)
    res.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    res.update(base=a.base, head=a.head, arms=arms, runs=runs)
    for name, ph in [*res["per_set"].items(), ("total", res["total"])]:
        line = f"{name[:28]:28s}" + "".join(
            f"  {p} {ph[p]['base_ms']:6.1f} -> {ph[p]['head_ms']:6.1f} ({ph[p]['paired_diff_ms']:+.1f})"
            for p in PHASES
        )
        print(line)
    print(f"quiet rounds: {res['quiet_rounds']} of {res['rounds']}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
