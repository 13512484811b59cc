"""A whole training step on one GPU against the planner's prediction of the same step.

The device model's per-layer rows (gpu_device_model.py) time transformer blocks alone; a
training step also runs the embedding, the logits and the loss, the optimizer, the casts of
mixed precision and whatever the host and the allocator add between kernels. This script
trains a Llama-style decoder (RMSNorm, grouped-query attention through PyTorch's
scaled_dot_product_attention, a SwiGLU FFN, untied output layer; no rotary embedding) with
fp32 weights, bf16 autocast and fused AdamW on one GPU, and writes side by side:

* measured: the median step over ``--steps`` (CUDA events, after 3 warm-ups), and, from a
  PyTorch profiler trace of 2 more steps, the kernel time per step by class (matrix multiplies,
  attention, the rest) and the time no kernel ran;
* the planner's prediction of the same configuration on this GPU (one GPU, micro-batch = global
  batch, no recompute, bf16): its step and its parts (``stallscope.plan``'s breakdown);
* the compute factor that anchors the planner on the measured step (``plan.anchor``), and the
  step the planner predicts with the profiler trace as its efficiency table.

If the planner's blocks match the device rows (their layer factor) but this step does not, the
gap lies outside the blocks: the classes and the idle time say where. Without a GPU it says so
and exits 0; ``--device cpu --quick`` runs the same code on tiny sizes and a CPU trace (checks
the script: no kernels, so no factor), with the planner's side timed for ``--gpu``.

    python bench/gpu_step_check.py [--layers 4] [--steps 10]
"""

from __future__ import annotations

import gzip
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_device_model import (  # the bench folder's module
    device_name,
    parser,
    run_header,
    torch_for,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "gpu_step_check.json"

#: Llama 3.1 8B's layer (hidden, heads, KV heads, FFN) and vocabulary at 8k tokens; --quick:
#: a small one that trains on a CPU in seconds.
FULL = {"hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256,
        "seq_len": 8192}  # fmt: skip
QUICK = {"hidden": 256, "heads": 4, "kv_heads": 2, "ffn_hidden": 512, "vocab": 1024,
         "seq_len": 128}  # fmt: skip

#: Kernel-name fragments by class (CUTLASS / cuBLAS / nvjet GEMMs; flash, fmha and cuDNN
#: attention kernels); anything else is "other".
GEMM_NAMES = ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul")
ATTENTION_NAMES = ("flash", "fmha", "attention", "sdpa", "cudnn")


def decoder(torch: Any, shape: dict[str, int], layers: int) -> Any:
    """The Llama-style decoder of the module doc, ``layers`` deep."""
    from torch import nn

    h, heads, kv, ffn = shape["hidden"], shape["heads"], shape["kv_heads"], shape["ffn_hidden"]
    d = h // heads

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = nn.RMSNorm(h), nn.RMSNorm(h)
            self.q, self.k, self.v = (nn.Linear(h, n * d, bias=False) for n in (heads, kv, kv))
            self.o = nn.Linear(h, h, bias=False)
            self.gate, self.up = nn.Linear(h, ffn, bias=False), nn.Linear(h, ffn, bias=False)
            self.down = nn.Linear(ffn, h, bias=False)

        def forward(self, x: Any) -> Any:
            b, s, _ = x.shape
            y = self.n1(x)
            q = self.q(y).view(b, s, heads, d).transpose(1, 2)
            k = self.k(y).view(b, s, kv, d).transpose(1, 2)
            v = self.v(y).view(b, s, kv, d).transpose(1, 2)
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, s, h))
            y = self.n2(x)
            return x + self.down(nn.functional.silu(self.gate(y)) * self.up(y))

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(shape["vocab"], h)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.RMSNorm(h)
            self.out = nn.Linear(h, shape["vocab"], bias=False)

        def forward(self, tokens: Any) -> Any:
            x = self.embed(tokens)
            for blk in self.blocks:
                x = blk(x)
            return self.out(self.norm(x))

    return Decoder()


def trainer(torch: Any, device: str, shape: dict[str, int], layers: int, batch: int) -> Any:
    """A function running one training step (forward, loss, backward, AdamW)."""
    model = decoder(torch, shape, layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    tokens = torch.randint(0, shape["vocab"], (batch, shape["seq_len"] + 1), device=device)
    dtype = torch.bfloat16

    def step() -> None:
        with torch.autocast(device_type=device, dtype=dtype):
            logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            logits.float().flatten(0, 1), tokens[:, 1:].flatten()
        )
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def step_seconds(torch: Any, device: str, step: Any, n: int) -> list[float]:
    """Each of ``n`` steps' seconds, after 3 warm-ups. On a GPU the steps are queued back to
    back, as a training loop runs them, each between CUDA events read at the end: waiting on
    each step would add the next one's launch to the idle time."""
    for _ in range(3):
        step()
    if device != "cuda":
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            out.append(time.perf_counter() - t0)
        return out
    torch.cuda.synchronize()
    events = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step()
        e.record()
        events.append((s, e))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in events]


def profile(torch: Any, device: str, step: Any, path: Path, steps: int = 2) -> Path:
    """A PyTorch profiler trace of ``steps`` steps (record_shapes, gzip) at ``path``."""
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=acts, record_shapes=True, schedule=schedule(wait=0, warmup=1,
                 active=steps)) as prof:  # fmt: skip
        for _ in range(steps + 1):
            step()
            prof.step()
    raw = path.with_suffix("")
    prof.export_chrome_trace(str(raw))
    path.write_bytes(gzip.compress(raw.read_bytes()))
    raw.unlink()
    return path


def kernel_classes(trace: Path, steps: int) -> dict[str, float]:
    """Seconds per step of GPU kernels by class, their union (busy) and the profiled span."""
    doc = orjson.loads(gzip.decompress(trace.read_bytes()))
    kernels = [e for e in doc.get("traceEvents", []) if e.get("cat") == "kernel" and "dur" in e]
    out = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for e in kernels:
        name = str(e.get("name", "")).lower()
        cls = (
            "attention"
            if any(k in name for k in ATTENTION_NAMES)
            else "gemm"
            if any(k in name for k in GEMM_NAMES)
            else "other"
        )
        out[cls] += float(e["dur"]) * 1e-6 / steps
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in kernels)
    busy, end = 0.0, float("-inf")
    for a, b in spans:  # union of the kernel intervals (several streams may overlap)
        busy += max(0.0, b - max(a, end))
        end = max(end, b)
    out["busy"] = busy * 1e-6 / steps
    out["kernels"] = len(kernels)
    return out


def planner_side(gpu: str, shape: dict[str, int], layers: int, batch: int, measured: float,
                 trace: Path | None) -> dict[str, Any]:  # fmt: skip
    """The planner's prediction of the step, its parts, the anchor on ``measured`` and the
    step with ``trace`` as the efficiency table (each a message where it cannot be made)."""
    from stallscope.plan import PlanError, anchor, load_model, load_system, predict_model
    from stallscope.plan._breakdown import breakdown
    from stallscope.plan._costs import costs

    model = load_model({"name": "llama-step-check", "layers": layers, "gated_ffn": True,
                        "tied_embeddings": False, **shape})  # fmt: skip
    system = {"name": "one-gpu", "gpu": gpu, "gpus_per_node": 1, "intra_node_GBps": 1,
              "inter_node_Gbps": 1}  # fmt: skip
    kw = {"nodes": 1, "gpus_per_node": 1, "micro_batch": batch, "global_batch": batch}
    p = predict_model(model, load_system(system), **kw)
    parts = breakdown(p, costs(model, p.strategy, p.system))
    out: dict[str, Any] = {
        "gpu": p.system.device.name,
        "config": p.strategy.label(),
        "step_s": p.step_ns * 1e-9,
        "parts_s": {part: sec for part, sec, _ in parts.iter_rows() if sec},
        "memory_GiB": p.memory.total / 2**30,
    }
    try:
        a = anchor(p, measured)
        out["anchor"] = {"compute_factor": a.factor, "blind_error": a.blind_error}
    except PlanError as e:
        out["anchor"] = {"error": str(e)}
    if trace is not None:
        try:
            q = predict_model(model, load_system(system, efficiency_table=trace), **kw)
            out["with_trace_table_step_s"] = q.step_ns * 1e-9
        except PlanError as e:
            out["with_trace_table_step_s"] = {"error": str(e)}
    return out


def main() -> int:
    ap = parser(__doc__ or "", RESULTS, "tiny sizes (checks the script)")
    ap.add_argument("--layers", type=int, default=4, help="transformer layers (default 4)")
    ap.add_argument("--batch", type=int, default=1, help="sequences per step (default 1)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--gpu", default=None, help="the planner's GPU (default: the one used)")
    ap.add_argument("--keep-trace", type=Path, default=None, help="also write the trace here")
    args = ap.parse_args()
    torch = torch_for(args.device)
    if torch is None:
        return 0
    t0 = time.monotonic()
    torch.manual_seed(0)
    shape = QUICK if args.quick else FULL
    layers = min(args.layers, 2) if args.quick else args.layers
    name = device_name(torch, args.device)
    gpu = args.gpu or (name.replace("NVIDIA ", "") if args.device == "cuda" else "H200-SXM")
    step = trainer(torch, args.device, shape, layers, args.batch)
    times = step_seconds(torch, args.device, step, max(3, args.steps))
    measured = statistics.median(times)
    with tempfile.TemporaryDirectory() as tmp:
        trace = profile(torch, args.device, step, Path(tmp) / "step.pt.trace.json.gz")
        classes = kernel_classes(trace, 2)
        if args.keep_trace is not None:
            args.keep_trace.write_bytes(trace.read_bytes())
        plan = planner_side(gpu, shape, layers, args.batch, measured,
                            trace if classes["kernels"] else None)  # fmt: skip
    result = {
        **run_header("gpu_step_check", torch, args.device, args.quick),
        "model": {"layers": layers, "batch": args.batch, **shape},
        "measured": {
            "step_s": measured,
            "step_seconds": times,
            "kernels_per_step_s": classes,
            "idle_per_step_s": max(0.0, measured - classes["busy"]) if classes["kernels"] else None,
        },
        "planner": plan,
        "elapsed_s": time.monotonic() - t0,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"measured step {measured:.4f} s; planner {plan['step_s']:.4f} s on {plan['gpu']}; "
          f"anchor {plan['anchor']} -> {args.out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
