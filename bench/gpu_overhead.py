"""Step overhead of tracing real training steps on a GPU: stallscope (full and continuous
mode) against no tracing and against torch.profiler, interleaved.

    python bench/gpu_overhead.py              # about 4 minutes on one H100
    python bench/gpu_overhead.py --quick      # about 1 minute
    python bench/gpu_overhead.py --device cpu # tiny sizes on the CPU (CUPTI parts skip)

Workloads (bf16 autocast on the GPU, AdamW, a step = forward + backward + optimizer):
``transformer``: a stack of pre-norm encoder blocks (d_model 1024, 16 heads, 8 layers, batch 8 x
1,024 tokens); ``resnet``: a ResNet-18 (basic blocks, channels last, batch 64 at 224 x 224). Both
are launch-bound (on an H200: 22 and 9.5 ms a step, ~560 kernels each; the host's launch rate
sets the step, so any per-launch cost shows in full): the worst case for kernel tracing.
``transformer_wide`` (d_model 2048, 4 layers, 8 x 2,048 tokens) and ``resnet_b256`` (batch 256)
are GPU-bound: the host runs ahead of the device, as in most training, and per-launch costs
hide behind kernels. On the CPU all are tiny.

Modes: ``off`` (untraced), ``stallscope`` (stallscope.trace(), default backends: CUPTI on a
GPU), ``continuous`` (the same in mode="continuous", its defaults: device events in one step in
100 at most, so none in a repeat this short: the host side's cost), ``continuous_duty``
(mode="continuous" with a device window every --duty-every steps, budget off: the cost of the
windows, CUPTI's start, synchronisation and finalize included, projected to the default one in
100 as overhead x duty_every / 100), ``torch.profiler`` (CPU and CUDA activities). Each mode runs in a process of its own, holding the workload on the device (two
CUPTI clients cannot share a process); one process runs at a time. Each repeat gives every mode
a fresh trace (or profiler) in a rotated order: it starts, runs --warmup steps, then --steps
timed steps (synchronized before and after), and stops outside the timing. Every step runs in
forward / backward / optimizer regions and is marked (stallscope.step(), or the profiler's
step()), so all modes run the same code. Step time = the timed steps' wall time / --steps. Reported per
workload and mode: median, quartiles, min, max of the repeats; overhead = median / median(off)
- 1, and the median of the repeats' paired ratios. Targets: stallscope <= 2 % and <= 1/3 of
torch.profiler's overhead; continuous <= 1 %, and continuous_duty projected to one window in
100 steps <= 1 %.

CUPTI's cost by activity kind (`--kinds`, on the transformer, GPU only): the stallscope mode
with each optional CUPTI feature of capture/_cupti.py `Options` switched off in turn (runtime
API records, NVTX markers, CUPTI overhead records, external correlation) and with all of them
off (kernels, copies, memsets and syncs only: what the stall table reads), so the cheapest set
that keeps the stall table exact can be the default.

Writes bench/results/gpu_overhead.json (naming the device; --out for another file).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MODES = ("off", "stallscope", "continuous", "continuous_duty", "torch.profiler")
# continuous_duty: device windows at a fixed cadence (budget off), so that a short repeat holds
# some; projected to the default cadence (capture/_continuous.py DEFAULT_DEVICE_EVERY) below.
DUTY_EVERY = {"quick": 3, "full": 5}
DEFAULT_DEVICE_EVERY = 100
KIND_VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no_cupti": {"no_backends": True},  # regions and steps only: the Python side's cost
    "writer_idle": {"flush_interval": 3600.0},  # no part file written while timed
    "no_runtime_api": {"runtime_api": False},
    "no_markers": {"markers": False},
    "no_overhead": {"overhead": False},
    "no_external_correlation": {"external_correlation": False},
    "kernels_copies_only": {
        "runtime_api": False,
        "markers": False,
        "overhead": False,
        "external_correlation": False,
    },
}
TARGETS = {
    "stallscope": 0.02,
    "continuous": 0.01,
    "continuous_duty_projected": 0.01,
    "stallscope_vs_profiler": 1 / 3,
}


def transformer(
    torch: Any, device: str, shape: tuple[int, int, int, int, int] = (1024, 16, 8, 8, 1024)
) -> tuple[Any, Callable[[], Any]]:
    big = device == "cuda"
    d, heads, layers, batch, seq = shape if big else (64, 4, 2, 4, 32)
    layer = torch.nn.TransformerEncoderLayer(
        d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True
    )
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(device)
    x = torch.randn(batch, seq, d, device=device)
    return model, lambda: model(x).float().pow(2).mean()


def resnet(torch: Any, device: str, batch_gpu: int = 64) -> tuple[Any, Callable[[], Any]]:
    nn = torch.nn
    big = device == "cuda"
    width, batch, size = (64, batch_gpu, 224) if big else (8, 4, 32)

    class Block(nn.Module):  # type: ignore[misc]
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(self.b2(self.c2(y)) + self.down(x))

    layers: list[Any] = [
        nn.Conv2d(3, width, 7, 2, 3, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = width
    for i, mult in enumerate((1, 2, 4, 8)):
        cout = width * mult
        layers += [Block(cin, cout, 1 if i == 0 else 2), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    model = nn.Sequential(*layers).to(device)
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    if big:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    return model, lambda: torch.nn.functional.cross_entropy(model(x).float(), y)


def transformer_wide(torch: Any, device: str) -> tuple[Any, Callable[[], Any]]:
    """GPU-bound: d_model 2048, 4 layers, 8 x 2,048 tokens (~20 TFLOP a step, ~280 kernels of
    ~100 us each on an H100: the host runs ahead of the device, as in most training)."""
    return transformer(torch, device, (2048, 16, 4, 8, 2048))


def resnet_b256(torch: Any, device: str) -> tuple[Any, Callable[[], Any]]:
    """GPU-bound: the ResNet-18 at batch 256 (4x the launch-bound one's work, the same kernels)."""
    return resnet(torch, device, 256)


WORKLOADS = {
    "transformer": transformer,
    "resnet": resnet,
    "transformer_wide": transformer_wide,
    "resnet_b256": resnet_b256,
}


class Runner:
    """One workload's step, and the modes' contexts around a repeat."""

    def __init__(self, torch: Any, device: str, name: str, out: Path) -> None:
        self.torch = torch
        self.device = device
        self.model, self.loss = WORKLOADS[name](torch, device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.out = out
        self.n = 0
        self.events: dict[str, int] = {}  # of the latest stallscope trace
        import stallscope

        self.regions = [
            stallscope.region(n, category="compute") for n in ("forward", "backward", "optimizer")
        ]

    def step(self) -> None:
        """One training step, in the regions a stallscope user marks (they record only while
        a trace does: every mode runs the same code)."""
        torch = self.torch
        ctx = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if self.device == "cuda"
            else contextlib.nullcontext()
        )
        with self.regions[0], ctx:
            loss = self.loss()
        with self.regions[1]:
            loss.backward()
        with self.regions[2]:
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    @contextlib.contextmanager
    def mode(self, mode: str, cupti: dict[str, Any] | None = None) -> Iterator[Callable[[], None]]:
        """The mode's tracing around a repeat; yields the per-step marker call."""
        import stallscope

        self.n += 1
        run = self.out / f"r{self.n:04d}-{mode.replace('.', '_')}"
        if mode == "off":
            yield lambda: None
        elif mode in ("stallscope", "continuous", "continuous_duty"):
            from stallscope.capture import _cupti

            saved = _cupti.configure()
            kinds = dict(cupti or {})
            no_backends = kinds.pop("no_backends", False)
            flush_interval = kinds.pop("flush_interval", None)
            every = kinds.pop("device_every", None)
            _cupti.configure(**kinds)
            opts: dict[str, Any] = {"mode": "continuous"} if mode != "stallscope" else {}
            if every is not None:
                opts |= {"device_every": every, "device_budget": 1.0}
            if flush_interval is not None:
                opts["flush_interval"] = flush_interval
            if no_backends:
                opts["backends"] = ()
            try:
                with stallscope.trace(run, **opts):
                    yield stallscope.step
                    self.sync()  # the GPU's records belong to the trace
            finally:
                _cupti.configure(**saved.__dict__)
            with contextlib.suppress(Exception):
                ev = stallscope.load(run)
                self.events = {"events": ev.height, "kernels": int((ev["kind"] == "kernel").sum())}
            with contextlib.suppress(Exception):  # device windows: their count and cost
                doc = json.loads((run / "run.json").read_text())
                proc = next(iter(doc["processes"].values()))
                duty = proc["backends"]["cupti"].get("duty")
                if duty:
                    self.events["duty"] = {
                        k: duty[k] for k in ("windows", "cost_s", "toggle_s", "elapsed_s")
                    }
            shutil.rmtree(run, ignore_errors=True)
        else:
            acts = [self.torch.profiler.ProfilerActivity.CPU]
            if self.device == "cuda":
                acts.append(self.torch.profiler.ProfilerActivity.CUDA)
            with self.torch.profiler.profile(activities=acts) as prof:
                yield prof.step
                self.sync()

    def repeat(
        self, mode: str, warmup: int, steps: int, cupti: dict[str, Any] | None = None
    ) -> float:
        """ms per step of one repeat of `mode` (a fresh trace)."""
        with self.mode(mode, cupti) as mark:
            for _ in range(warmup):
                mark()
                self.step()
            self.sync()
            t0 = time.perf_counter()
            for _ in range(steps):
                mark()
                self.step()
            self.sync()
            return (time.perf_counter() - t0) / steps * 1e3


def stats(xs: list[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return {
        "median": statistics.median(xs),
        "q25": q[0],
        "q75": q[2],
        "min": min(xs),
        "max": max(xs),
    }


def compare(times: dict[str, list[float]], base: str) -> dict[str, Any]:
    """Per mode: its stats and its overhead over `base` (median ratio, and paired)."""
    out: dict[str, Any] = {}
    b = statistics.median(times[base])
    for m, xs in times.items():
        paired = [x / y - 1 for x, y in zip(xs, times[base], strict=True)]
        out[m] = stats(xs) | {
            "overhead": statistics.median(xs) / b - 1,
            "overhead_paired": statistics.median(paired),
        }
    return out


def _worker(conn: Any, name: str, device: str, out: str, warmup: int) -> None:
    """A process that runs repeats of one mode family on one workload, on request: (mode,
    CUPTI options, steps) -> (ms per step, the trace's events)."""
    import torch

    torch.manual_seed(0)
    if device == "cpu":
        torch.set_num_threads(1)
    runner = Runner(torch, device, name, Path(out))
    for _ in range(warmup + 2):  # compile kernels, warm the allocator, before any timing
        runner.step()
    runner.sync()
    conn.send("ready")
    while (msg := conn.recv()) is not None:
        mode, cupti, steps = msg
        runner.events = {}
        ms = runner.repeat(mode, warmup, steps, cupti)
        conn.send((ms, runner.events))


def _family(mode: str) -> str:
    """The worker process a mode runs in. Untraced, stallscope and continuous repeats share one
    process (stallscope finalizes CUPTI at each stop, so an untraced repeat after a traced one
    runs clean): two processes of the same code differ by up to 30 % in launch-bound step time
    on a 16-core H200 host (their cores and memory placement), more than the overhead measured.
    torch.profiler has a process of its own (two CUPTI clients cannot share a process, and
    CUPTI stays attached after it), so its overhead carries that process-to-process spread."""
    return "torch.profiler" if mode == "torch.profiler" else "stallscope"


class Workers:
    """A process per mode family (`_family`), each holding the workload on the device; one
    runs at a time."""

    def __init__(self, name: str, device: str, out: Path, warmup: int, modes: list[str]) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conns: dict[str, Any] = {}
        self.procs = []
        for m in modes:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(child, name, device, str(out / m), warmup))
            p.start()
            self.conns[m], _ = parent, self.procs.append(p)
        for m, c in self.conns.items():
            if c.recv() != "ready":
                raise SystemExit(f"worker {m} failed to start")

    def repeat(
        self, mode: str, steps: int, cupti: dict[str, Any] | None = None
    ) -> tuple[float, dict[str, Any]]:
        family = _family(mode)
        conn = self.conns[family]
        conn.send(("stallscope" if mode in KIND_VARIANTS else mode, cupti, steps))
        ms, events = conn.recv()
        return float(ms), dict(events)

    def close(self) -> None:
        for c in self.conns.values():
            with contextlib.suppress(OSError):  # a worker that died has closed its end
                c.send(None)
        for p in self.procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()


def measure(
    workers: Workers,
    keys: list[str],
    repeats: int,
    steps: int,
    variants: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, list[float]], dict[str, dict[str, Any]]]:
    """Every mode (or CUPTI variant of the stallscope mode) `repeats` times, the order rotated
    each repeat: ms per step per repeat, and each mode's latest trace's events."""
    times: dict[str, list[float]] = {k: [] for k in keys}
    events: dict[str, dict[str, Any]] = {}
    for r in range(repeats):
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
            cupti = None if variants is None else variants.get(k)
            ms, ev = workers.repeat(k, steps, cupti)
            times[k].append(ms)
            if ev:
                events[k] = ev
    return times, events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda if any")
    ap.add_argument("--quick", action="store_true", help="about 1 minute: fewer steps, no --kinds")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--steps", type=int, default=None, help="timed steps per repeat")
    ap.add_argument("--warmup", type=int, default=3, help="steps before the timed ones, per repeat")
    ap.add_argument("--workloads", default="transformer,resnet,transformer_wide,resnet_b256")
    ap.add_argument(
        "--duty-every",
        type=int,
        default=None,
        help="continuous_duty's device window cadence (default 5; 3 with --quick)",
    )
    ap.add_argument(
        "--kinds",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure CUPTI's cost per activity kind (default: on a GPU, not --quick)",
    )
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "gpu_overhead.json"
    )
    a = ap.parse_args()
    import torch

    import stallscope

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    if a.repeats < 10:
        print(f"note: {a.repeats} repeats (the method asks for >= 10)", file=sys.stderr)
    steps = a.steps or (6 if a.quick else 20)
    duty_every = a.duty_every or DUTY_EVERY["quick" if a.quick else "full"]
    if a.quick and a.warmup == 3:
        a.warmup = 2
    from stallscope.capture import _cupti

    cupti_ok, cupti_why = _cupti.status()
    kinds = a.kinds if a.kinds is not None else (device == "cuda" and not a.quick)
    out_dir = Path(tempfile.mkdtemp(prefix="stallscope-gpu-overhead-"))
    t_start = time.monotonic()
    result: dict[str, Any] = {
        "benchmark": "gpu_overhead",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name()
        if device == "cuda"
        else f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "stallscope": stallscope.__version__,
        "cupti": {"available": cupti_ok, "why": cupti_why},
        "method": {
            "repeats": a.repeats,
            "steps": steps,
            "warmup": a.warmup,
            "quick": a.quick,
            "order": "rotated per repeat; untraced, stallscope and continuous in one process",
            "duty_every": duty_every,
        },
        "targets": TARGETS,
        "workloads": {},
        "complete": False,  # true once every workload (and the kinds) was measured
    }
    if not cupti_ok:
        result["cupti"]["skipped"] = f"stallscope traces without GPU activity here: {cupti_why}"
    for name in [w for w in a.workloads.split(",") if w]:
        families = sorted({_family(m) for m in MODES})
        workers = Workers(name, device, out_dir / name, a.warmup, families)
        try:
            duty = {"continuous_duty": {"device_every": duty_every}}
            times, events = measure(workers, list(MODES), a.repeats, steps, duty)
            cmp = compare(times, "off")
            # one window in duty_every steps measured; the default is one in 100 at most
            projected = cmp["continuous_duty"]["overhead"] * duty_every / DEFAULT_DEVICE_EVERY
            cmp["continuous_duty"]["device_every"] = duty_every
            cmp["continuous_duty"]["projected_every_100"] = projected
            verdict = {
                "stallscope": cmp["stallscope"]["overhead"] <= TARGETS["stallscope"],
                "continuous": cmp["continuous"]["overhead"] <= TARGETS["continuous"],
                "continuous_duty_projected": projected <= TARGETS["continuous_duty_projected"],
                "stallscope_vs_profiler": cmp["stallscope"]["overhead"]
                <= TARGETS["stallscope_vs_profiler"] * max(cmp["torch.profiler"]["overhead"], 0.0),
            }
            result["workloads"][name] = {
                "step_ms": cmp,
                "times_ms": times,
                "trace_events": events,
                "met": verdict | {"all": all(verdict.values())},
            }
            _write(a.out, result)  # what is measured so far survives a time limit
            print(
                f"{name}: "
                + ", ".join(
                    f"{m} {cmp[m]['median']:.3f} ms ({100 * cmp[m]['overhead']:+.2f} %)"
                    for m in MODES
                )
            )
            if kinds and name == "transformer" and cupti_ok:
                keys = ["off", *KIND_VARIANTS]
                kt, kev = measure(workers, keys, max(6, a.repeats // 2), steps, KIND_VARIANTS)
                result["kinds"] = {
                    "step_ms": compare(kt, "off"),
                    "times_ms": kt,
                    "trace_events": kev,
                    "variants": KIND_VARIANTS,
                }
                print(
                    "kinds: "
                    + ", ".join(
                        f"{k} {100 * v['overhead']:+.2f} %"
                        for k, v in result["kinds"]["step_ms"].items()
                    )
                )
        finally:
            workers.close()
    if kinds and "kinds" not in result:
        result["kinds"] = {"skipped": f"CUPTI unavailable: {cupti_why}"}
    result["wall_s"] = time.monotonic() - t_start
    result["met"] = all(w["met"]["all"] for w in result["workloads"].values())
    result["complete"] = True
    shutil.rmtree(out_dir, ignore_errors=True)
    _write(a.out, result)
    print(f"wrote {a.out} ({result['wall_s']:.0f} s)")


def _write(out: Path, result: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
