"""What a long training run's GPU does that short kernel benchmarks do not see.

1. Cold probes: layer-sized GEMMs (bf16; fp8 where torch runs it) timed as
   gpu_device_model.py times its rows (CUDA-event medians of >= 10 ms repeats after 3
   warm-ups), after the GPU has idled ``--idle-s``.
2. Heat: a stack of GPT layers (gpu_device_model.py's block) trained back to back for
   ``--heat-s``: forward, backward, fused Adam; every step timed with CUDA events. Beside it the
   SM clock, board power, temperature and clock-event reasons (power cap, thermal, hardware
   slowdown) are sampled through NVML every ``--sample-ms``.
3. Hot probes: the same GEMMs again at once, at the temperature and power the heat left.
4. Weight-gradient GEMMs, (k x T) @ (T x n) over T tokens: with a 16-bit output (what the
   device model's GEMM rows time) and adding into a 32-bit gradient (Megatron's and NeMo's
   gradient-accumulation fusion, beta = 1: read and write 4 bytes per weight), by token count.

The result (bench/results/gpu_sustained.json) holds every probe, the step times and the
samples. The device's efficiency table (python/stallscope/predict/data/efficiency/<GPU>.json,
as gpu_device_model.py names it) gets a ``sustained`` entry: ``gemm_hot_over_cold``, the median
over the probes of hot over cold time, which the planner applies to the device's compute
(``DeviceModel.sustained``); and the step drift, clocks and power behind it.

Without a GPU it says so and exits 0; ``--device cpu --quick`` runs the same code on tiny sizes
(checks the script; measures nothing of interest, and leaves the tables alone).

    python bench/gpu_sustained.py [--heat-s 75] [--idle-s 15]
"""

from __future__ import annotations

import ctypes
import datetime as dt
import platform
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_device_model import (  # the bench folder's module
    Timer,
    device_name,
    gpt_block,
    parser,
    table_path,
    torch_for,
)

ROOT = Path(__file__).resolve().parents[1]
MIN_STEPS = 5  # steps of the heat whatever --heat-s
RESULTS = ROOT / "bench" / "results" / "gpu_sustained.json"

#: NVML clock-event reason bits (nvml.h, nvmlClocksEventReason*), by what they say.
REASONS = {
    "power_cap": 0x4,  # software power cap: the board at its power limit
    "hw_slowdown": 0x8 | 0x80,  # hardware slowdown, power brake
    "thermal": 0x20 | 0x40,  # software and hardware thermal slowdown
}


class Nvml:
    """The few NVML calls the samples need, through the driver's libnvidia-ml (ctypes)."""

    def __init__(self, index: int = 0, pci_bus_id: str = "") -> None:
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        self._ok(self.lib.nvmlInit_v2())
        self.handle = ctypes.c_void_p()
        if pci_bus_id:
            self._ok(
                self.lib.nvmlDeviceGetHandleByPciBusId_v2(
                    pci_bus_id.encode(), ctypes.byref(self.handle)
                )
            )
        else:
            self._ok(self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle)))
        reasons = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = reasons or self.lib.nvmlDeviceGetCurrentClocksThrottleReasons

    @staticmethod
    def _ok(rc: int) -> None:
        if rc != 0:
            raise OSError(f"NVML call failed with status {rc}")

    def _uint(self, fn: Any, *args: Any) -> int:
        v = ctypes.c_uint()
        self._ok(fn(self.handle, *args, ctypes.byref(v)))
        return v.value

    def fixed(self) -> dict[str, Any]:
        """The device's limits: max SM clock (MHz), enforced power limit (W)."""
        return {
            "sm_clock_max_MHz": self._uint(self.lib.nvmlDeviceGetMaxClockInfo, 1),
            "power_limit_W": self._uint(self.lib.nvmlDeviceGetEnforcedPowerLimit) / 1e3,
        }

    def sample(self) -> dict[str, Any]:
        """SM clock (MHz), power (W), temperature (C), clock-event reason bits."""
        bits = ctypes.c_ulonglong()
        self._ok(self._reasons(self.handle, ctypes.byref(bits)))
        return {
            "t": time.monotonic(),
            "sm_MHz": self._uint(self.lib.nvmlDeviceGetClockInfo, 1),  # NVML_CLOCK_SM
            "power_W": self._uint(self.lib.nvmlDeviceGetPowerUsage) / 1e3,  # mW
            "temp_C": self._uint(self.lib.nvmlDeviceGetTemperature, 0),  # NVML_TEMPERATURE_GPU
            "reasons": bits.value,
        }


class Sampler:
    """NVML samples every ``period_s`` on a thread, each tagged with the phase it fell in."""

    def __init__(self, nvml: Nvml | None, period_s: float) -> None:
        self.nvml, self.period_s = nvml, period_s
        self.phase = "start"
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            if self.nvml is not None:
                self.samples.append(self.nvml.sample() | {"phase": self.phase})

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def phase_stats(samples: list[dict[str, Any]], phase: str) -> dict[str, Any]:
    """Medians of one phase's samples and the share of samples under each clock-event reason."""
    rows = [s for s in samples if s["phase"] == phase]
    if not rows:
        return {"samples": 0}
    out: dict[str, Any] = {"samples": len(rows)}
    for key in ("sm_MHz", "power_W", "temp_C"):
        vals = [float(s[key]) for s in rows]
        out[key] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    for name, mask in REASONS.items():
        out[f"share_{name}"] = sum(1 for s in rows if s["reasons"] & mask) / len(rows)
    return out


def probe_shapes(device: str, quick: bool) -> list[tuple[int, int, int]]:
    """(m, n, k) of the probes: QKV, FFN up and FFN down of a 4096-wide layer at 8192 tokens."""
    if device == "cpu":
        return [(64, 192, 64), (64, 256, 64)]
    shapes = [(8192, 3 * 4096, 4096), (8192, 4 * 4096, 4096), (8192, 4096, 4 * 4096)]
    return shapes[:2] if quick else shapes


def probes(torch: Any, timer: Timer, device: str, quick: bool) -> list[dict[str, Any]]:
    """Each probe GEMM's median seconds, bf16 and (on a GPU that runs it) fp8."""
    rows: list[dict[str, Any]] = []
    one = torch.ones((), device=device)
    for m, n, k in probe_shapes(device, quick):
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        rows.append(
            {"m": m, "n": n, "k": k, "dtype": "bf16", "seconds": timer(lambda a=a, b=b: a @ b)}
        )
        if device == "cuda" and hasattr(torch, "_scaled_mm"):
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major: cuBLASLt's TN
            try:
                s = timer(
                    lambda a8=a8, b8=b8: torch._scaled_mm(
                        a8, b8, one, one, out_dtype=torch.bfloat16
                    )
                )
            except Exception as e:  # an fp8 path this torch/GPU lacks
                rows.append({"m": m, "n": n, "k": k, "dtype": "fp8", "error": repr(e)[:300]})
            else:
                rows.append({"m": m, "n": n, "k": k, "dtype": "fp8", "seconds": s})
    return rows


def heat(torch: Any, device: str, quick: bool, seconds: float, sampler: Sampler) -> dict[str, Any]:
    """Train a GPT layer stack back to back for ``seconds``; every step's time."""
    from torch import nn

    h, heads, seq, mb, layers = (64, 4, 32, 2, 2) if device == "cpu" else (4096, 32, 2048, 2, 4)
    block = gpt_block(torch)
    cuda = device == "cuda"
    with torch.device(device):
        stack = nn.Sequential(*[block(h, heads) for _ in range(layers)]).to(torch.bfloat16)
    opt = torch.optim.Adam(stack.parameters(), lr=1e-4, fused=cuda)
    x = torch.randn(mb, seq, h, device=device, dtype=torch.bfloat16)
    # Steps are queued back to back (no synchronisation but a bound of two steps ahead, so the
    # GPU never idles between them); each is timed between CUDA events read at the end.
    marks: list[tuple[float, Any, Any]] = []  # (seconds since the heat began, start, end)
    walls: list[tuple[float, float]] = []
    sampler.phase = "heat"
    t0 = time.monotonic()
    # at least MIN_STEPS: the drift leaves the first two out and compares two windows
    while time.monotonic() - t0 < seconds or len(marks) + len(walls) < MIN_STEPS:
        at, w0 = time.monotonic() - t0, time.perf_counter()
        s = e = None
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
        stack(x).float().square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            e.record()
            marks.append((at, s, e))
            if len(marks) > 2:
                marks[-3][2].synchronize()
        else:
            walls.append((at, time.perf_counter() - w0))
    if cuda:
        torch.cuda.synchronize()
    steps = walls or [(at, s.elapsed_time(e) / 1e3) for at, s, e in marks]
    del stack, opt, x
    if cuda:
        torch.cuda.empty_cache()
    return {
        "block": {"hidden": h, "heads": heads, "seq": seq, "micro_batch": mb, "layers": layers},
        "steps": len(steps),
        "step_seconds": [[round(a, 3), b] for a, b in steps],
        **drift(steps, 5.0 if cuda else 0.0),
    }


def drift(steps: list[tuple[float, float]], window_s: float) -> dict[str, Any]:
    """Median step time of the first and the last ``window_s`` of the heat (the first two
    steps left out: allocator and autotuning), and their ratio."""
    body = steps[2:] or steps
    if not body:
        return {}
    end = body[-1][0]
    first = [t for at, t in body if at <= body[0][0] + window_s] or [body[0][1]]
    last = [t for at, t in body if at >= end - window_s] or [body[-1][1]]
    a, b = statistics.median(first), statistics.median(last)
    return {"step_first_s": a, "step_last_s": b, "step_last_over_first": b / a}


def wgrad(torch: Any, timer: Timer, device: str, quick: bool) -> list[dict[str, Any]]:
    """A weight gradient (k x T) @ (T x n) with a bf16 output against the same GEMM added into
    an fp32 gradient: fused (addmm with an fp32 output, beta = 1) where torch can, else the
    GEMM's fp32 output added separately (marked unfused)."""
    rows: list[dict[str, Any]] = []
    tokens = (
        [32, 64] if device == "cpu" else ([4096, 16384] if quick else [2048, 4096, 8192, 16384])
    )
    weights = [(64, 128)] if device == "cpu" else [(4096, 4096), (4096, 14336)]
    for k, n in weights:
        c = torch.zeros(k, n, device=device, dtype=torch.float32)
        for t in tokens:
            a = torch.randn(t, k, device=device, dtype=torch.bfloat16)
            b = torch.randn(t, n, device=device, dtype=torch.bfloat16)
            out16 = timer(lambda a=a, b=b: a.t() @ b)
            try:
                torch.addmm(c, a.t(), b, out_dtype=torch.float32)
                acc = timer(lambda a=a, b=b, c=c: torch.addmm(c, a.t(), b, out_dtype=torch.float32))
                how = "fused"
            except (RuntimeError, TypeError, NotImplementedError):
                acc = timer(lambda a=a, b=b, c=c: c.add_((a.t() @ b).float()))
                how = "unfused"
            rows.append({"k": k, "n": n, "tokens": t, "bf16_out_seconds": out16,
                         "fp32_accumulate_seconds": acc, "accumulate": how,
                         "ratio": acc / out16})  # fmt: skip
    return rows


def summary(cold: list[dict[str, Any]], hot: list[dict[str, Any]]) -> dict[str, Any]:
    """Hot over cold seconds per probe and their median."""
    pairs = []
    for c, h in zip(cold, hot, strict=True):
        if "seconds" in c and "seconds" in h:
            pairs.append({"m": c["m"], "n": c["n"], "k": c["k"], "dtype": c["dtype"],
                          "hot_over_cold": h["seconds"] / c["seconds"]})  # fmt: skip
    ratios = [p["hot_over_cold"] for p in pairs]
    return {"pairs": pairs, "gemm_hot_over_cold": statistics.median(ratios) if ratios else None}


def sustained_entry(result: dict[str, Any]) -> dict[str, Any]:
    """The efficiency table's ``sustained`` entry (what the planner reads)."""
    heat_stats = result["nvml"].get("heat", {})
    return {
        "gemm_hot_over_cold": result["summary"]["gemm_hot_over_cold"],
        "step_last_over_first": result["heat"].get("step_last_over_first"),
        "heat_s": result["heat_s"],
        "sm_clock_MHz": {
            p: result["nvml"].get(p, {}).get("sm_MHz", {}).get("median")
            for p in ("cold", "heat", "hot")
        },
        "power_W": heat_stats.get("power_W", {}).get("median"),
        "share_power_cap": heat_stats.get("share_power_cap"),
        "source": "measured with bench/gpu_sustained.py: layer GEMMs after an idle and after "
        f"{result['heat_s']:.0f} s of back-to-back training steps (CUDA-event medians)",
        "date": result["date"][:10],
    }


def main() -> int:
    ap = parser(__doc__ or "", RESULTS, "fewer probes")
    ap.add_argument("--heat-s", type=float, default=75.0, help="seconds of training steps")
    ap.add_argument("--idle-s", type=float, default=15.0, help="idle before the cold probes")
    ap.add_argument("--sample-ms", type=float, default=100.0, help="NVML sampling period")
    args = ap.parse_args()
    torch = torch_for(args.device)
    if torch is None:
        return 0
    cuda = args.device == "cuda"
    torch.manual_seed(0)
    timer = Timer(torch, args.device, args.min_time_s)
    name = device_name(torch, args.device)
    nvml: Nvml | None = None
    nvml_error = ""
    if cuda:
        try:
            bus = str(getattr(torch.cuda.get_device_properties(0), "pci_bus_id", "") or "")
            nvml = Nvml(pci_bus_id=bus) if bus else Nvml()
        except (OSError, AttributeError) as e:  # no NVML: the timings still stand
            nvml_error = repr(e)
    result: dict[str, Any] = {
        "bench": "gpu_sustained",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": name,
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
        },
        "quick": args.quick,
        "heat_s": args.heat_s,
        "idle_s": args.idle_s,
        "nvml_limits": nvml.fixed() if nvml else {"error": nvml_error or "no GPU"},
    }
    t0 = time.monotonic()
    with Sampler(nvml, args.sample_ms / 1e3) as sampler:
        sampler.phase = "idle"
        time.sleep(args.idle_s)
        sampler.phase = "cold"
        cold = probes(torch, timer, args.device, args.quick)
        print(f"[{time.monotonic() - t0:6.1f} s] cold probes: {len(cold)}", flush=True)
        result["heat"] = heat(torch, args.device, args.quick, args.heat_s, sampler)
        print(f"[{time.monotonic() - t0:6.1f} s] heat: {result['heat']['steps']} steps", flush=True)
        sampler.phase = "hot"
        hot = probes(torch, timer, args.device, args.quick)
        sampler.phase = "wgrad"
        result["wgrad"] = wgrad(torch, timer, args.device, args.quick)
        print(f"[{time.monotonic() - t0:6.1f} s] hot probes, wgrad: {len(result['wgrad'])}")
    result["cold"], result["hot"] = cold, hot
    result["summary"] = summary(cold, hot)
    samples = sampler.samples
    result["nvml"] = {p: phase_stats(samples, p) for p in ("idle", "cold", "heat", "hot", "wgrad")}
    result["samples"] = [
        [round(s["t"] - t0, 2), s["phase"], s["sm_MHz"], s["power_W"], s["temp_C"], s["reasons"]]
        for s in samples
    ]
    result["elapsed_s"] = time.monotonic() - t0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    if cuda and result["summary"]["gemm_hot_over_cold"]:
        path = table_path(args.tables, name)
        table = orjson.loads(path.read_bytes()) if path.exists() else {
            "format": "stallscope.device_efficiency", "version": 1, "device": name}  # fmt: skip
        table["sustained"] = sustained_entry(result)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(table, option=orjson.OPT_INDENT_2))
    s = result["summary"]["gemm_hot_over_cold"]
    d = result["heat"].get("step_last_over_first")
    print(
        f"done in {result['elapsed_s']:.0f} s; GEMM hot/cold {s if s is None else round(s, 4)}, "
        f"step last/first {d if d is None else round(d, 4)} -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
