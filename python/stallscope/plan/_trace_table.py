"""A measured efficiency table from a PyTorch profiler (Kineto) trace of the user's own job.

A trace recorded with ``torch.profiler.profile(record_shapes=True)`` on the GPU to plan for
holds what ``bench/gpu_device_model.py`` measures, in the job's own shapes and software: each
matrix multiply's operator with its input shapes and the GPU kernels it launched, the attention
kernels' operators with their query shapes, the device-to-device copies with their sizes.
``table_from_trace`` turns it into rows of the measured table's layout, which
``DeviceModel.calibrated`` fits as it fits a measured table (``efficiency_table`` in a system
file, ``--efficiency-table`` on ``plan``, ``predict`` and ``whatif``). A folder of traces, one
per rank of a job, gives one table: each shape's median over every rank's calls.

* GEMMs: ``aten::mm``, ``aten::addmm``, ``aten::bmm``, ``aten::baddbmm`` (bf16, fp16) and
  ``aten::_scaled_mm`` (fp8); m, n, k (and the batch) from the operator's input shapes, the time
  the sum of the kernels launched inside it, the median over the operator's calls per shape.
  fp32 GEMMs are left out (TF32 or not is not in the trace), as are GEMMs outside PyTorch's
  operators (Transformer Engine's), which the trace records without shapes.
* Attention: PyTorch's ``scaled_dot_product_attention`` kernels (flash, memory-efficient, cuDNN)
  forward and backward, paired by batch, heads, sequence, head dimension, mask and dtype, at the
  planner's FLOP count (forward 4 b a s^2 d, half when causal; backward 2.5x); the mask from the
  operator's recorded ``is_causal``, causal where the trace does not record it. The kernel that
  ran (cuDNN's, or FlashAttention's) is named by the kernels' names.
* Copies: ``Memcpy DtoD`` events, bytes read and written over the time.

A kernel belongs to the innermost of these operators that encloses its launch on the launching
thread (Kineto's ``correlation`` ties a launch to its kernel); kernels launched by CUDA graphs
have no such operator and are left out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from stallscope.exceptions import TraceImportError
from stallscope.io.kineto._parse import read_bytes
from stallscope.plan._errors import PlanError

#: operator -> (index of the first GEMM operand in its input shapes, batched)
GEMM_OPS: Final = {
    "aten::mm": (0, False),
    "aten::addmm": (1, False),
    "aten::bmm": (0, True),
    "aten::baddbmm": (1, True),
    "aten::_scaled_mm": (0, False),
}
#: attention operator -> (pass, index of the query in its inputs, index of is_causal)
ATTENTION_OPS: Final = {
    "aten::_scaled_dot_product_flash_attention": ("fwd", 0, 4),
    "aten::_scaled_dot_product_efficient_attention": ("fwd", 0, 6),
    "aten::_scaled_dot_product_cudnn_attention": ("fwd", 0, 6),
    "aten::_scaled_dot_product_flash_attention_backward": ("bwd", 1, 11),
    "aten::_scaled_dot_product_efficient_attention_backward": ("bwd", 1, 11),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("bwd", 1, 14),
}
DTYPES: Final = {
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
}
_OPS: Final = frozenset(GEMM_OPS) | frozenset(ATTENTION_OPS)
OUTSIDE: Final = "kernels outside these operators (CUDA graphs, other operators)"


def read_trace(path: Path) -> dict[str, Any]:
    """A trace file's JSON (gzip or plain; the Kineto importer's reader)."""
    try:
        doc = orjson.loads(read_bytes(path))
    except (TraceImportError, ValueError) as e:
        raise PlanError(f"profiler trace {path} is not readable JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise PlanError(f"{path} is not a PyTorch profiler trace: it has no traceEvents list")
    return doc


def read_traces(folder: Path) -> dict[str, Any]:
    """The efficiency table of a folder of traces (``*.json``, ``*.json.gz``: one per rank)."""
    files = sorted(f for f in folder.iterdir() if f.name.endswith((".json", ".json.gz")))
    if not files:
        raise PlanError(
            f"{folder} holds no profiler trace (*.json or *.json.gz): give a trace file or a "
            "folder of them"
        )
    return table_from_traces([(read_trace(f), f.name) for f in files], f"{folder.name}/")


def is_trace(doc: Any) -> bool:
    return isinstance(doc, Mapping) and isinstance(doc.get("traceEvents"), list)


def _enclosing_ops(events: list[Mapping[str, Any]]) -> dict[Any, Mapping[str, Any]]:
    """Each launch's correlation -> the innermost GEMM or attention operator enclosing it on the
    launching thread."""
    per_thread: dict[tuple[Any, Any], list[tuple[float, int, float, Mapping[str, Any]]]] = (
        defaultdict(list)
    )
    for e in events:
        cat, ts = e.get("cat"), e.get("ts")
        if ts is None:
            continue
        key = (e.get("pid"), e.get("tid"))
        if cat in ("cpu_op", "Operator") and e.get("name") in _OPS:
            # ordered by start, the enclosing (longer) one first at a tie
            per_thread[key].append((float(ts), 0, -float(e.get("dur") or 0), e))
        elif cat in ("cuda_runtime", "cuda_driver", "Runtime"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                per_thread[key].append((float(ts), 1, 0.0, e))
    owner: dict[Any, Mapping[str, Any]] = {}
    for items in per_thread.values():
        items.sort(key=lambda x: (x[0], x[1], x[2]))
        stack: list[tuple[float, Mapping[str, Any]]] = []  # (end, operator)
        for ts, kind, neg_dur, e in items:
            while stack and stack[-1][0] < ts:
                stack.pop()
            if kind == 0:
                stack.append((ts - neg_dur, e))
            elif stack:
                owner[e["args"]["correlation"]] = stack[-1][1]
    return owner


def _dims(op: Mapping[str, Any], i: int) -> list[int] | None:
    dims = (op.get("args") or {}).get("Input Dims") or []
    if i < len(dims) and isinstance(dims[i], list) and dims[i]:
        return [int(x) for x in dims[i]]
    return None


def _dtype(op: Mapping[str, Any], i: int) -> str | None:
    types = (op.get("args") or {}).get("Input type") or []
    return DTYPES.get(str(types[i])) if i < len(types) else None


def _causal(op: Mapping[str, Any], i: int) -> bool | None:
    concrete = (op.get("args") or {}).get("Concrete Inputs") or []
    value = str(concrete[i]) if i < len(concrete) else ""
    return {"True": True, "False": False}.get(value)


def _gemm_key(op: Mapping[str, Any]) -> tuple[int, int, int, int, str] | None:
    i, batched = GEMM_OPS[str(op["name"])]
    a, b, dtype = _dims(op, i), _dims(op, i + 1), _dtype(op, i)
    if a is None or b is None or dtype is None:
        return None
    if batched:
        if len(a) != 3 or len(b) != 3:
            return None
        return a[0], a[1], b[2], a[2], dtype  # (batch, m, n, k)
    if len(a) != 2 or len(b) != 2:
        return None
    return 1, a[0], b[1], a[1], dtype


@dataclass
class _Calls:
    """What the traces read so far hold: each call's time by shape, the copies, and what was
    left out and why."""

    gemm: dict[tuple[int, int, int, int, str], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    attn: dict[tuple[str, int, int, int, int, bool, str], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    copies: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    assumed_causal: int = 0
    kernels: set[str] = field(default_factory=set)  # the attention calls' kernel names


def _collect(doc: Mapping[str, Any], source: str, calls: _Calls) -> None:
    """Add one trace's GEMM and attention calls and copies to ``calls``."""
    events = [e for e in doc["traceEvents"] if isinstance(e, Mapping)]
    ops = [e for e in events if e.get("cat") in ("cpu_op", "Operator")]
    if ops and not any("Input Dims" in (e.get("args") or {}) for e in ops):
        raise PlanError(
            f"profiler trace {source} has no operator shapes: record it with "
            "torch.profiler.profile(record_shapes=True) to calibrate the planner with it"
        )
    owner = _enclosing_ops(events)
    kernel_us: dict[int, float] = defaultdict(float)  # operator (by id) -> its kernels' time
    by_id: dict[int, Mapping[str, Any]] = {}
    kernel_names: dict[int, set[str]] = defaultdict(set)
    for e in events:
        cat = e.get("cat")
        if cat in ("kernel", "Kernel"):
            op = owner.get((e.get("args") or {}).get("correlation"))
            if op is None:
                calls.skipped[OUTSIDE] += 1
                continue
            kernel_us[id(op)] += float(e.get("dur") or 0)
            by_id[id(op)] = op
            kernel_names[id(op)].add(str(e.get("name", "")))
        elif cat in ("gpu_memcpy", "Memcpy") and "DtoD" in str(e.get("name", "")):
            n, dur = int((e.get("args") or {}).get("bytes") or 0), float(e.get("dur") or 0)
            if n > 0 and dur > 0:  # read and written
                calls.copies.append({"op": "copy", "bytes": n, "GBps": 2 * n / dur / 1e3})
    for key, op in by_id.items():
        us, name = kernel_us[key], str(op["name"])
        if us <= 0:
            continue
        if name in GEMM_OPS:
            g = _gemm_key(op)
            if g is None:
                calls.skipped["GEMMs without 16-bit or FP8 operands and shapes"] += 1
                continue
            calls.gemm[g].append(us * 1e-6)
            continue
        p, qi, ci = ATTENTION_OPS[name]
        q, dtype = _dims(op, qi), _dtype(op, qi)
        if q is None or len(q) != 4 or dtype not in ("bf16", "fp16"):
            calls.skipped[
                "attention calls without 16-bit [batch, heads, seq, head_dim] queries"
            ] += 1
            continue
        causal = _causal(op, ci)
        if causal is None:
            causal, calls.assumed_causal = True, calls.assumed_causal + 1
        calls.attn[(p, q[0], q[1], q[2], q[3], causal, dtype)].append(us * 1e-6)
        calls.kernels |= kernel_names[key]


def table_from_trace(doc: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The efficiency table of a profiler trace (see the module doc)."""
    return table_from_traces([(doc, source)], source)


def table_from_traces(docs: list[tuple[Mapping[str, Any], str]], source: str) -> dict[str, Any]:
    """The efficiency table of profiler traces (one per rank of a job, or one): their "gemm",
    "attention" and "memory" rows, the device they ran on, and what was left out and why."""
    calls = _Calls()
    for doc, name in docs:
        _collect(doc, name, calls)
    gemm = [
        {
            "m": m, "n": n, "k": k, "batch": b, "dtype": dt, "calls": len(ts),
            "tflops": 2.0 * b * m * n * k / statistics.median(ts) / 1e12,
        }
        for (b, m, n, k, dt), ts in sorted(calls.gemm.items())
    ]  # fmt: skip
    attention = []
    for (p, b, a, s, d, causal, dt), ts in sorted(calls.attn.items()):
        if p != "fwd":
            continue
        back = calls.attn.get(("bwd", b, a, s, d, causal, dt))
        if not back:
            calls.skipped["attention forwards without their backward"] += 1
            continue
        flops = 4.0 * b * a * s * s * d * (0.5 if causal else 1.0)
        attention.append(
            {
                "batch": b, "heads": a, "seq": s, "head_dim": d, "causal": causal, "dtype": dt,
                "fwd_tflops": flops / statistics.median(ts) / 1e12,
                "bwd_tflops": 2.5 * flops / statistics.median(back) / 1e12,
            }
        )  # fmt: skip
    devices = docs[0][0].get("deviceProperties") or [{}] if docs else [{}]
    table: dict[str, Any] = {
        "format": "stallscope.device_efficiency",
        "device": str(devices[0].get("name", "")) if isinstance(devices[0], Mapping) else "",
        "source": f"PyTorch profiler trace {source}",
        "gemm": gemm,
        "attention": attention,
        "memory": calls.copies,
        "left_out": dict(calls.skipped),
    }
    if attention:
        table["attention_kernel"] = (
            "cudnn" if any("cudnn" in k for k in calls.kernels) else "flash2"
        )
        if calls.assumed_causal:
            table["assumed_causal"] = calls.assumed_causal
    if not (gemm or attention or calls.copies):
        why = "; ".join(f"{n} {what}" for what, n in calls.skipped.items()) or "no GPU kernels"
        raise PlanError(
            f"profiler trace {source} has no GEMM, attention or copy the planner can time "
            f"({why}): profile a training step of the model in bf16, fp16 or fp8 with "
            "record_shapes=True"
        )
    return table


def read_table(table: Any, where: str) -> Any:
    """A measured table's rows: a dict or list as given, a JSON file, or a PyTorch profiler
    trace (JSON or gzip; a folder of them, one per rank) turned into rows (``_trace_table``)."""
    if isinstance(table, dict):
        return table_from_trace(table, "(given)") if is_trace(table) else table
    if isinstance(table, list):
        return table
    path = Path(table)
    if path.is_dir():
        return read_traces(path)
    if path.suffix == ".gz" or path.name.endswith(".pt.trace.json"):
        return table_from_trace(read_trace(path), path.name)
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise PlanError(f"{where}: efficiency table {table} is not readable JSON ({e})") from None
    return table_from_trace(doc, path.name) if is_trace(doc) else doc
