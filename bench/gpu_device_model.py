"""What the predictor's and the planner's device model needs, measured on the GPU at hand.

1. GEMM: achieved TFLOP/s by shape and precision (bf16, fp16, tf32, fp32, fp8 where torch can
   run it), square sizes and the shapes a transformer layer runs (QKV, projection, FFN up and
   down, logits) at several token counts and hidden sizes.
2. Attention: scaled_dot_product_attention (flash) forward and backward TFLOP/s by sequence
   length, head size and causality.
3. Memory: device-to-device copy and elementwise (add, GELU, LayerNorm) GB/s by size.
4. A real training step's per-layer times: a stack of GPT-style transformer layers (bf16,
   autocast-free, fused SDPA), forward and backward of each layer timed with CUDA events at
   several (hidden, sequence, micro-batch) shapes, plus the whole step with an Adam update.

Times are CUDA-event medians over repeats after warm-up. FLOPs are counted as the planner
counts them: 2 m n k per GEMM; attention forward 4 b h s^2 d (halved when causal), backward 2.5x
forward (the flash backward recomputes the scores).

Writes bench/results/gpu_device_model.json (every measurement, the device, versions) and the
efficiency table the device model reads, python/stallscope/predict/data/efficiency/<GPU>.json.
Without a GPU it says so and exits 0; `--device cpu --quick` runs the same code on tiny sizes
(checks the script, measures nothing of interest).

    python bench/gpu_device_model.py [--quick] [--budget-s 240]
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "gpu_device_model.json"
TABLES = ROOT / "python" / "stallscope" / "predict" / "data" / "efficiency"


class Timer:
    """Median seconds of fn() over repeats; CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, torch: Any, device: str, min_time_s: float) -> None:
        self.torch, self.device, self.min_time_s = torch, device, min_time_s

    def __call__(self, fn: Any, warmup: int = 3, reps: int = 10) -> float:
        t = self.torch
        for _ in range(warmup):
            fn()
        if self.device == "cuda":
            t.cuda.synchronize()
            # Enough calls per repeat that one repeat lasts >= min_time_s (launch overhead and
            # the timer's resolution stay below 1 %).
            s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            one = max(s.elapsed_time(e) / 1e3, 1e-6)
            inner = max(1, min(1000, math.ceil(self.min_time_s / one)))
            times = []
            for _ in range(reps):
                s.record()
                for _ in range(inner):
                    fn()
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e) / 1e3 / inner)
            return statistics.median(times)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)


def dtypes(torch: Any, device: str) -> dict[str, Any]:
    out = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    if device == "cpu":
        return {"bf16": torch.bfloat16, "fp32": torch.float32}
    return out


def gemm(
    torch: Any, timer: Timer, device: str, quick: bool, deadline: float
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    squares = [256, 1024, 4096] if quick else [256, 512, 1024, 2048, 4096, 8192, 16384]
    if device == "cpu":
        squares = [64, 128, 256]
    shapes = [(n, n, n, "square") for n in squares]
    tokens = [2048, 8192] if quick else [1024, 4096, 16384]
    hidden = [1024, 4096] if quick else [1024, 2048, 4096, 8192, 12288]
    if device == "cpu":
        tokens, hidden = [64], [64, 128]
    for tk in tokens:
        for h in hidden:
            for tp in (1, 8) if not quick else (1,):
                if h % tp:
                    continue
                shapes += [
                    (tk, 3 * h // tp, h, f"qkv tp{tp}"),
                    (tk, h, h // tp, f"proj tp{tp}"),
                    (tk, 4 * h // tp, h, f"ffn_up tp{tp}"),
                    (tk, h, 4 * h // tp, f"ffn_down tp{tp}"),
                ]
    variants = dict(dtypes(torch, device))
    if device == "cuda":
        variants["tf32"] = torch.float32

    def wanted(name: str, what: str) -> bool:
        # bf16 (and fp8 below) on every shape; fp16 without the tp8 shapes; fp32/tf32 squares.
        if name == "bf16" or device == "cpu":
            return True
        if name == "fp16":
            return "tp8" not in what
        return what == "square"

    for name, dt_ in variants.items():
        for m, n, k, what in shapes:
            if not wanted(name, what):
                continue
            if time.monotonic() > deadline:
                rows.append({"op": "gemm", "skipped": "time budget"})
                return rows
            if m * k + k * n + m * n > 3e9:  # elements: keep well inside device memory
                continue
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            a = torch.randn(m, k, device=device, dtype=dt_)
            b = torch.randn(k, n, device=device, dtype=dt_)
            s = timer(lambda a=a, b=b: a @ b, reps=5)
            rows.append(
                {
                    "op": "gemm",
                    "what": what,
                    "m": m,
                    "n": n,
                    "k": k,
                    "dtype": name,
                    "seconds": s,
                    "tflops": 2 * m * n * k / s / 1e12,
                }
            )
            del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    if device == "cuda" and hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"):
        for m, n, k, what in shapes:
            if time.monotonic() > deadline or m % 16 or n % 16 or k % 16:
                continue
            try:
                a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
                b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()
                one = torch.ones((), device=device)
                s = timer(lambda a=a, b=b, one=one: torch._scaled_mm(a, b, one, one,
                                                                     out_dtype=torch.bfloat16), reps=5)  # fmt: skip
            except Exception as e:  # an fp8 path this torch/GPU lacks: say so once
                rows.append({"op": "gemm", "dtype": "fp8", "error": repr(e)[:300]})
                break
            rows.append(
                {
                    "op": "gemm",
                    "what": what,
                    "m": m,
                    "n": n,
                    "k": k,
                    "dtype": "fp8",
                    "seconds": s,
                    "tflops": 2 * m * n * k / s / 1e12,
                }
            )
    return rows


def attention(
    torch: Any, timer: Timer, device: str, quick: bool, deadline: float
) -> list[dict[str, Any]]:
    import torch.nn.functional as nnf

    rows: list[dict[str, Any]] = []
    seqs = [1024, 4096] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    if device == "cpu":
        seqs = [64, 128]
    for dname, dt_ in dtypes(torch, device).items():
        if dname == "fp32":
            continue
        for d in (64, 128):
            for s in seqs:
                for causal in (True, False):
                    if time.monotonic() > deadline:
                        rows.append({"op": "attention", "skipped": "time budget"})
                        return rows
                    heads = 16 if d == 128 else 32
                    b = max(1, (16384 if device == "cuda" else 256) // s)
                    q, k, v = (torch.randn(b, heads, s, d, device=device, dtype=dt_,
                                           requires_grad=True) for _ in range(3))  # fmt: skip
                    fwd = timer(
                        lambda q=q, k=k, v=v, c=causal: nnf.scaled_dot_product_attention(
                            q, k, v, is_causal=c
                        )
                    )
                    out = nnf.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    g = torch.randn_like(out)

                    def fb(
                        q: Any = q, k: Any = k, v: Any = v, c: bool = causal, g: Any = g
                    ) -> None:
                        o = nnf.scaled_dot_product_attention(q, k, v, is_causal=c)
                        o.backward(g)

                    both = timer(fb)
                    flops = 4 * b * heads * s * s * d * (0.5 if causal else 1.0)
                    bwd = max(both - fwd, 1e-9)
                    rows.append(
                        {
                            "op": "attention",
                            "batch": b,
                            "heads": heads,
                            "seq": s,
                            "head_dim": d,
                            "causal": causal,
                            "dtype": dname,
                            "fwd_seconds": fwd,
                            "bwd_seconds": bwd,
                            "fwd_tflops": flops / fwd / 1e12,
                            "bwd_tflops": 2.5 * flops / bwd / 1e12,
                        }
                    )
                    del q, k, v, out, g
    return rows


def memory(
    torch: Any, timer: Timer, device: str, quick: bool, deadline: float
) -> list[dict[str, Any]]:
    import torch.nn.functional as nnf

    rows: list[dict[str, Any]] = []
    sizes = [1 << 20, 1 << 24, 1 << 28] if device == "cuda" else [1 << 16, 1 << 20]
    if device == "cuda" and not quick:
        sizes = [1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30]
    for n in sizes:  # bytes of the bf16 input
        if time.monotonic() > deadline:
            break
        x = torch.randn(n // 2, device=device, dtype=torch.bfloat16)
        y = torch.empty_like(x)
        ln = torch.nn.LayerNorm(4096, device=device, dtype=torch.bfloat16) if n >= 8192 else None
        ops = {
            "copy": (lambda x=x, y=y: y.copy_(x), 2 * n),
            "add": (lambda x=x: x + x, 2 * n),
            "gelu": (lambda x=x: nnf.gelu(x), 2 * n),
        }
        if ln is not None:
            x2 = x.view(-1, 4096)
            ops["layernorm"] = (lambda x2=x2, ln=ln: ln(x2), 2 * n)
        for op, (fn, nbytes) in ops.items():
            s = timer(fn)
            rows.append({"op": op, "bytes": n, "seconds": s, "GBps": nbytes / s / 1e9})
        del x, y
    return rows


def gpt_block(torch: Any) -> Any:
    """The GPT-style transformer layer the per-layer rows time: pre-LayerNorm, fused QKV,
    causal SDPA, output projection, a 4h GELU MLP (the planner's layer with ffn_hidden 4h)."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self, h: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.up, self.down = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x: Any) -> Any:
            b, s, h = x.shape
            q, k, v = (
                self.qkv(self.ln1(x))
                .view(b, s, 3, self.heads, h // self.heads)
                .permute(2, 0, 3, 1, 4)
            )
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
            return x + self.down(nn.functional.gelu(self.up(self.ln2(x))))

    return Block


def layer_times(torch: Any, device: str, quick: bool, deadline: float) -> list[dict[str, Any]]:
    """A GPT-style stack: per layer forward and backward times (CUDA events around each layer
    through forward hooks and backward hooks on its input), and the whole step with Adam."""
    from torch import nn

    block = gpt_block(torch)

    shapes = [(2048, 16, 2048, 1), (4096, 32, 2048, 1)] if quick else [
        (1024, 16, 2048, 4), (2048, 16, 2048, 2), (4096, 32, 2048, 1), (4096, 32, 4096, 1),
        (8192, 64, 2048, 1), (12288, 96, 2048, 1)]  # fmt: skip
    if device == "cpu":
        shapes = [(64, 4, 32, 2)]
    rows: list[dict[str, Any]] = []
    dt_ = torch.bfloat16
    cuda = device == "cuda"

    def event() -> Any:
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    for h, heads, seq, mb in shapes:
        if time.monotonic() > deadline:
            rows.append({"op": "layer", "skipped": "time budget"})
            break
        layers = 4 if h < 8192 else 2  # 12 h^2 parameters a layer, bf16 weights, grads, Adam
        with torch.device(device):  # initialised where it runs: no CPU copy of the weights
            stack = nn.Sequential(*[block(h, heads) for _ in range(layers)]).to(dtype=dt_)
        opt = torch.optim.Adam(stack.parameters(), lr=1e-4, fused=cuda)
        x = torch.randn(mb, seq, h, device=device, dtype=dt_, requires_grad=True)
        fwd: dict[int, list[float]] = {i: [] for i in range(layers)}
        bwd: dict[int, list[float]] = {i: [] for i in range(layers)}
        steps: list[float] = []
        for it in range(8 if cuda else 2):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            # Forward: an event before and after each layer. Backward: autograd runs the layers
            # in reverse on the same stream; a hook on each layer's input and output records an
            # event when the gradient reaches it, so layer k's backward lies between the events
            # of its output and its input.
            marks_f, grad_at = [], {}
            y, ins = x, []
            for blk in stack:
                ins.append(y)
                start = event() if cuda else None
                y = blk(y)
                if cuda:
                    marks_f.append((start, event()))
            outs = [*ins[1:], y]
            hooks = []
            if cuda:
                for k in range(layers):
                    for key, tensor in (("out", outs[k]), ("in", ins[k])):
                        hooks.append(tensor.register_hook(
                            lambda g, k=k, key=key, at=grad_at: (at.setdefault((k, key), event()), g)[1]))  # fmt: skip
            y.float().square().mean().backward()
            for hk in hooks:
                hk.remove()
            opt.step()
            opt.zero_grad(set_to_none=True)
            x.grad = None
            if cuda:
                torch.cuda.synchronize()
            steps.append(time.perf_counter() - t0)
            if cuda and it >= 2:
                for k, (s, e) in enumerate(marks_f):
                    fwd[k].append(s.elapsed_time(e) / 1e3)
                    bwd[k].append(grad_at[(k, "out")].elapsed_time(grad_at[(k, "in")]) / 1e3)
            del y, ins, outs
        params = sum(p.numel() for p in stack[0].parameters())
        flops_fwd = 2 * mb * seq * params + 4 * mb * seq * seq * h * 0.5
        row: dict[str, Any] = {
            "op": "layer", "hidden": h, "heads": heads, "seq": seq, "micro_batch": mb,
            "dtype": "bf16", "params_per_layer": params, "flops_fwd_per_layer": flops_fwd,
        }  # fmt: skip
        if cuda:
            f = statistics.median(v for k in fwd for v in fwd[k])
            b = statistics.median(v for k in bwd for v in bwd[k])
            row |= {"fwd_seconds": f, "bwd_seconds": b, "fwd_tflops": flops_fwd / f / 1e12,
                    "bwd_tflops": 2 * flops_fwd / b / 1e12,
                    "per_layer_fwd_seconds": [statistics.median(fwd[k]) for k in range(layers)],
                    "per_layer_bwd_seconds": [statistics.median(bwd[k]) for k in range(layers)]}  # fmt: skip
        row["step_wall_seconds_median"] = statistics.median(steps[2:] or steps)
        rows.append(row)
        del stack, opt, x
        if cuda:
            torch.cuda.empty_cache()
    return rows


def efficiency_table(result: dict[str, Any]) -> dict[str, Any]:
    """The device model's table: GEMM and attention rows only, what the planner fits."""
    keep_g = ("m", "n", "k", "dtype", "tflops", "what")
    keep_a = ("batch", "heads", "seq", "head_dim", "causal", "dtype", "fwd_tflops", "bwd_tflops")
    return {
        "format": "stallscope.device_efficiency",
        "version": 1,
        "device": result["device"],
        "source": "measured with bench/gpu_device_model.py (CUDA-event medians)",
        "date": result["date"][:10],
        "versions": result["versions"],
        "gemm": [{k: r[k] for k in keep_g} for r in result["gemm"] if "tflops" in r],
        "attention": [{k: r[k] for k in keep_a} for r in result["attention"] if "fwd_tflops" in r],
        "memory": [{k: r[k] for k in ("op", "bytes", "GBps")} for r in result["memory"]],
        "layers": [r for r in result["layers"] if "fwd_seconds" in r],
    }


def torch_for(device: str) -> Any:
    """torch, or None (the reason printed) without torch or, for ``device`` cuda, a GPU."""
    try:
        import torch
    except ImportError:
        print("no torch: nothing measured")
        return None
    if device == "cuda" and not torch.cuda.is_available():
        print("no GPU: torch.cuda.is_available() is False; nothing measured")
        return None
    return torch


def device_name(torch: Any, device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu"


def run_header(bench: str, torch: Any, device: str, quick: bool) -> dict[str, Any]:
    """What every device script's result starts with: the script, the date, the device, the
    software versions and whether it ran --quick."""
    return {
        "bench": bench,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_name(torch, device),
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if device == "cuda" else None,
            "python": platform.python_version(),
        },
        "quick": quick,
    }


def table_path(tables: Path, name: str) -> Path:
    """The device's efficiency table: "NVIDIA H200" -> <tables>/H200.json."""
    return tables / (name.replace("NVIDIA ", "").replace(" ", "-") + ".json")


def parser(doc: str, out: Path, quick: str) -> argparse.ArgumentParser:
    """The options the device scripts share: --quick, --device, --min-time-s, --out, --tables."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--min-time-s", type=float, default=0.01, help="per repeat, GPU")
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--tables", type=Path, default=TABLES, help="the efficiency tables' folder")
    return ap


def main() -> int:
    ap = parser(__doc__ or "", RESULTS, "fewer shapes (about a minute)")
    ap.add_argument("--budget-s", type=float, default=240.0, help="stop measuring after this")
    args = ap.parse_args()
    torch = torch_for(args.device)
    if torch is None:
        return 0
    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    torch.manual_seed(0)
    timer = Timer(torch, args.device, args.min_time_s)
    name = device_name(torch, args.device)
    result: dict[str, Any] = run_header("gpu_device_model", torch, args.device, args.quick)
    # Parts in order of value to the device model; each has the rest of the budget.
    for part, fn in (("gemm", gemm), ("attention", attention), ("memory", memory)):
        result[part] = fn(torch, timer, args.device, args.quick, deadline)
        print(f"[{time.monotonic() - t0:6.1f} s] {part}: {len(result[part])} rows", flush=True)
    result["layers"] = layer_times(torch, args.device, args.quick, deadline + 60)
    print(f"[{time.monotonic() - t0:6.1f} s] layers: {len(result['layers'])} rows", flush=True)
    result["elapsed_s"] = time.monotonic() - t0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    if args.device == "cuda":
        args.tables.mkdir(parents=True, exist_ok=True)
        table_path(args.tables, name).write_bytes(
            orjson.dumps(efficiency_table(result), option=orjson.OPT_INDENT_2)
        )
    best = max(
        (r["tflops"] for r in result["gemm"] if r.get("dtype") == "bf16" and "tflops" in r),
        default=0,
    )
    print(f"done in {result['elapsed_s']:.0f} s; best bf16 GEMM {best:.1f} TFLOP/s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
