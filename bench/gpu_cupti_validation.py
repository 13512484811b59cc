"""GPU validation of the CUPTI backend: stallscope against torch.profiler on a real GPU.

Workload: a transformer block (nn.TransformerEncoderLayer, forward + backward + AdamW step),
`--steps` measured steps after `--warmup` untraced ones. Each run is a fresh process (two CUPTI
clients cannot share one), in one of these modes:

- ``untraced``: the workload alone (the overhead baseline);
- ``stallscope``: stallscope.trace(backends=["cupti"]), a stallscope.step() per step;
- ``torch``: torch.profiler (CPU + CUDA activities), prof.step() per step;
- ``cupti_python``: NVIDIA's cupti-python as a third reference (skipped when not installed).

Runs are interleaved (`--reps` rounds, the order rotated each round). Checks: kernel count per
step equal between stallscope and torch.profiler (each launch is placed in the step whose host
window holds its launch call), total kernel time within 2 %; overhead of each tracer = median
step time traced / untraced. Results go to bench/results/gpu_cupti_validation.json (`--out`),
which names the GPU, the driver, CUDA and the date. Without a GPU the script says so and exits 0
having measured nothing.

    python bench/gpu_cupti_validation.py [--steps 50] [--reps 3]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODES = ("untraced", "stallscope", "torch", "cupti_python")


def no_gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device (no NVIDIA GPU or driver here)"
    return None


# -- the workload (runs in a worker process) --------------------------------------------------------
def build(args: argparse.Namespace) -> Any:
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        args.d_model, args.heads, 4 * args.d_model, batch_first=True, device="cuda"
    )
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.seq, args.d_model, device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = layer(x)
        y.float().square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    return step


def timed_steps(step: Any, n: int, before: Any = None, after: Any = None) -> list[int]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        if before is not None:
            before()
        step()
        if after is not None:
            after()
        out.append(time.perf_counter_ns() - t0)
    return out


def per_step(launch_ns: list[tuple[int, int]], windows: list[tuple[int, int]]) -> list[int]:
    """Kernel count per step: each (launch time, duration) placed in the window holding it."""
    starts = [w[0] for w in windows]
    counts = [0] * len(windows)
    for t, _ in launch_ns:
        i = bisect.bisect_right(starts, t) - 1
        if 0 <= i < len(windows) and t < windows[i][1]:
            counts[i] += 1
    return counts


def worker_stallscope(step: Any, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import polars as pl

    import stallscope

    run = tmp / "stallscope_run"
    with stallscope.trace(run, backends=["cupti"]) as tr:
        times = timed_steps(step, args.steps, before=stallscope.step)
    if tr.backend_info.get("cupti", {}).get("error"):
        raise SystemExit(f"stallscope CUPTI backend failed: {tr.backend_info['cupti']['error']}")
    ev = stallscope.load(run)
    lt = stallscope.analysis.launches(ev).filter(pl.col("kind") == "kernel")
    counts = lt.group_by("step").len().sort("step")
    per = dict(zip(counts["step"].to_list(), counts["len"].to_list(), strict=True))
    kernel_ns = int((lt["end_ns"] - lt["start_ns"]).sum())
    return {
        "step_ns": times,
        "kernels_per_step": [int(per.get(s, 0)) for s in range(1, args.steps + 1)],
        "kernel_ns": kernel_ns,
        "kernels": lt.height,
        "cupti": tr.backend_info.get("cupti", {}),
    }


def worker_torch(step: Any, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile, schedule

    path = tmp / "torch_trace.json"
    # A schedule, one cycle of every step: without one torch.profiler writes no ProfilerStep#N
    # ranges, and a later cycle's export would overwrite this one's.
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=0, warmup=0, active=args.steps, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        times = timed_steps(step, args.steps, after=prof.step)
    return {"step_ns": times, **torch_kernels(json.loads(path.read_text()), args.steps)}


def torch_kernels(doc: dict[str, Any], steps: int) -> dict[str, Any]:
    """Kernels per step of a torch.profiler trace: each kernel placed in the ProfilerStep#N
    window holding its launch call (same correlation id), the first `steps` windows."""
    evs = doc.get("traceEvents", [])
    windows = sorted(
        (int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000))
        for e in evs
        # the host ranges (user_annotation), not their GPU projections (gpu_user_annotation)
        if str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("ph") == "X"
        and e.get("cat") == "user_annotation"
    )
    launch = {
        e["args"]["correlation"]: int(e["ts"] * 1000)
        for e in evs
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    placed = [
        (launch[k["args"]["correlation"]], int(k["dur"] * 1000))
        for k in kernels
        if k.get("args", {}).get("correlation") in launch
    ]
    return {
        "kernels_per_step": per_step(placed, windows)[:steps],
        "kernel_ns": int(sum(k["dur"] for k in kernels) * 1000),
        "kernels": len(kernels),
    }


def worker_cupti_python(step: Any, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from cupti import cupti  # NVIDIA's cupti-python (optional)

    kernels: list[tuple[int, int]] = []

    def request() -> tuple[int, int]:
        return 8 << 20, 0

    def done(records: list[Any]) -> None:
        for r in records:
            if r.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                kernels.append((int(r.start), int(r.end)))

    cupti.activity_register_callbacks(request, done)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    times = timed_steps(step, args.steps)
    cupti.activity_flush_all(1)
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    with contextlib.suppress(Exception):
        cupti.finalize()
    return {
        "step_ns": times,
        "kernel_ns": sum(e - s for s, e in kernels),
        "kernels": len(kernels),
    }


def worker(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    step = build(args)
    for _ in range(args.warmup):
        step()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if mode == "untraced":
            return {"step_ns": timed_steps(step, args.steps)}
        if mode == "stallscope":
            return worker_stallscope(step, args, tmp)
        if mode == "torch":
            return worker_torch(step, args, tmp)
        return worker_cupti_python(step, args, tmp)


# -- the driver --------------------------------------------------------------------------------------
def versions() -> dict[str, Any]:
    import torch

    v: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    try:
        q = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        v["driver"] = q.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        v["driver"] = None
    try:
        import ctypes

        cuda = ctypes.CDLL("libcuda.so.1")
        n = ctypes.c_int(0)
        cuda.cuDriverGetVersion(ctypes.byref(n))
        v["driver_cuda"] = f"{n.value // 1000}.{n.value % 1000 // 10}"
    except OSError:
        v["driver_cuda"] = None
    try:
        from stallscope.capture import _cupti

        r = _cupti.load()
        v["cupti_library"], v["cupti_api_version"] = r.path, r.version
    except Exception as e:  # reported, the run goes on
        v["cupti_library"] = f"unavailable: {e}"
    return v


def run_worker(mode: str, argv: list[str]) -> dict[str, Any] | str:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", mode, *argv],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if out.returncode != 0:
        return f"exit {out.returncode}: {out.stderr.strip()[-800:]}"
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--out", type=Path, default=HERE / "results" / "gpu_cupti_validation.json")
    p.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return 0
    reason = no_gpu_reason()
    if reason is not None:
        print(f"no GPU: {reason}. Nothing was measured; run this on a machine with an NVIDIA GPU.")
        return 0
    argv = [
        f"--steps={args.steps}",
        f"--warmup={args.warmup}",
        f"--batch={args.batch}",
        f"--seq={args.seq}",
        f"--d-model={args.d_model}",
        f"--heads={args.heads}",
    ]
    try:
        import cupti  # noqa: F401

        modes = list(MODES)
    except ImportError:
        modes = list(MODES[:3])
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    errors: dict[str, list[str]] = {m: [] for m in modes}
    for rep in range(args.reps):
        order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
        for m in order:
            r = run_worker(m, argv)
            if isinstance(r, str):
                errors[m].append(r)
            else:
                runs[m].append(r)
            print(f"rep {rep} {m}: {'ok' if not isinstance(r, str) else r[:200]}", flush=True)
    med = {
        m: statistics.median(statistics.median(r["step_ns"]) for r in rs)
        for m, rs in runs.items()
        if rs
    }
    result: dict[str, Any] = {
        "bench": "gpu_cupti_validation",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "workload": {
            k: getattr(args, k) for k in ("steps", "warmup", "batch", "seq", "d_model", "heads")
        },
        "reps": args.reps,
        "median_step_ns": med,
        # each run's median, in the order run: how far the rounds spread
        "run_median_step_ns": {
            m: [statistics.median(r["step_ns"]) for r in rs] for m, rs in runs.items()
        },
        "overhead_vs_untraced": {
            m: med[m] / med["untraced"] for m in med if m != "untraced" and "untraced" in med
        },
        "errors": {m: e for m, e in errors.items() if e},
    }
    if runs.get("stallscope") and runs.get("torch"):
        s, t = runs["stallscope"][-1], runs["torch"][-1]
        mism = [
            (i + 1, a, b)
            for i, (a, b) in enumerate(
                zip(s["kernels_per_step"], t["kernels_per_step"], strict=False)
            )
            if a != b
        ]
        ratio = s["kernel_ns"] / t["kernel_ns"] if t["kernel_ns"] else float("nan")
        both = [s["kernels_per_step"], t["kernels_per_step"]]
        result["comparison"] = {
            "kernels_per_step_stallscope": s["kernels_per_step"],
            "kernels_per_step_torch": t["kernels_per_step"],
            "steps_with_different_counts": mism,
            # every measured step counted by both, with kernels, and the same count
            "kernel_count_equal_every_step": not mism
            and all(len(c) == args.steps and min(c, default=0) > 0 for c in both),
            "kernel_ns_stallscope": s["kernel_ns"],
            "kernel_ns_torch": t["kernel_ns"],
            "kernel_time_ratio": ratio,
            "kernel_time_within_2pct": abs(ratio - 1) <= 0.02,
            "stallscope_cupti_stats": s.get("cupti", {}).get("stats"),
        }
        if runs.get("cupti_python"):
            c = runs["cupti_python"][-1]
            result["comparison"]["cupti_python"] = {
                "kernels": c["kernels"],
                "kernel_ns": c["kernel_ns"],
            }
    path = args.out
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    cmp_ = result.get("comparison", {})
    print(f"GPU {result['versions']['gpu']}, driver {result['versions']['driver']}")
    for m, v in med.items():
        print(f"  {m:13s} median step {v / 1e6:8.3f} ms  x{v / med.get('untraced', v):.3f}")
    if cmp_:
        print(
            f"  kernel count equal every step: {cmp_['kernel_count_equal_every_step']}; "
            f"kernel time ratio stallscope/torch {cmp_['kernel_time_ratio']:.4f} "
            f"(within 2 %: {cmp_['kernel_time_within_2pct']})"
        )
    print(f"results: {path}")
    ok = bool(cmp_.get("kernel_count_equal_every_step")) and bool(
        cmp_.get("kernel_time_within_2pct")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
