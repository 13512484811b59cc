"""The device model: how long a GEMM, a fused attention kernel or a memory-bound kernel takes on
one GPU, from its datasheet figures and efficiencies set by public measurements or a measured
table.

GEMM (``_gemm``): t = max(flops / (peak x fraction x waves), bytes / HBM) + fixed, with
``fraction`` per precision and ``fixed`` from a public shape table (XLA's H100 table) or the
GPU's maximum achievable matmul (MAMF), or fitted to a measured table.

A table of measured GEMMs (rows m, n, k, dtype, tflops: ``predict/data/efficiency/<GPU>.json``,
or kernel times from a profile with their shapes) calibrates the fractions and ``fixed`` by
least squares over the rows' times; its attention rows give the attention fractions, its
memory-copy row the HBM fraction (``DeviceModel.calibrated``).

Fused attention: forward FLOPs 4 b s^2 h_d a (half when causal), backward 2.5 x forward, at the
kernel's published rate by head dimension and sequence length (``_attention``: FlashAttention-2,
FlashAttention-3 and cuDNN on H100), else at ``attn_fwd_fraction`` / ``attn_bwd_fraction`` of
the peak (FlashAttention-2's on A100). Memory-bound kernels (norms, activations, residual adds,
casts, the optimizer): bytes / (hbm x hbm_fraction) + fixed.

A table's ``sustained`` entry (``bench/gpu_sustained.py``: GEMMs after an idle and after a minute
of training steps) scales GEMM and attention times by its hot over cold ratio: the SM clock a long
run holds at its power limit. Memory-bound kernels keep their measured rate: the probes time
GEMMs only.

``compute_factor`` (a system file's key, found by ``anchor`` from one measured step of the
user's own job) divides GEMM and attention times: the rate the user's software reaches on the
GPU over the device model's. Memory-bound kernels and the peaks (hence MFU) keep their figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from stallscope.plan._attention import resolve, slowdown, table_rates
from stallscope.plan._errors import PlanError
from stallscope.plan._gemm import fit_line, waves
from stallscope.plan._gemm_shapes import ShapeTable
from stallscope.plan._measured_attention import Curves, curves, rates, sdpa_kernel

ELEMENT_BYTES: dict[str, float] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}
#: The device table's peak of a training precision named otherwise.
PEAK_KEY: dict[str, str] = {"nvfp4": "fp4"}


@dataclass(frozen=True)
class DeviceModel:
    """One GPU as the planner times it. Rates in TFLOP/s and GB/s (10^9 B/s), sizes in GB."""

    name: str
    peak_tflops: Mapping[str, float]
    hbm_GBps: float  # noqa: N815 (the system file's key)
    hbm_GB: float  # noqa: N815
    sms: int = 0
    matmul_fraction: float = 0.8
    matmul_fractions: Mapping[str, float] = field(default_factory=dict)  # measured, per dtype
    gemm_fixed_s: float = 5e-6
    attn_fwd_fraction: float = 0.7
    attn_bwd_fraction: float = 0.55
    hbm_fraction: float = 0.85
    #: the kernel a measured table's attention rows timed ("" without one), and their rates
    attention_measured: str = ""
    attention_curves: Curves = field(default_factory=dict)
    layer_factor: float = 1.0  # measured over modelled layer time (``_layer_fit``)
    #: hot over cold GEMM time: the clock a long run sustains at its power limit and
    #: temperature against the short bursts the table's rows time (1 without a measurement)
    sustained: float = 1.0
    #: GEMM and attention rate over the device model's, from a measured step (``_anchor``)
    compute_factor: float = 1.0
    #: measured over modelled GEMM time by shape (``_gemm_shapes``); None without a table
    gemm_shapes: ShapeTable | None = None
    basis: Mapping[str, str] = field(default_factory=dict)

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s at ``precision`` (nvfp4: the device table's fp4)."""
        precision = PEAK_KEY.get(precision, precision)
        tf = self.peak_tflops.get(precision)
        if tf is None and precision == "fp16":
            tf = self.peak_tflops.get("bf16")
        if tf is None:
            raise PlanError(
                f"GPU {self.name!r} has no {precision} peak in its figures (it has "
                f"{', '.join(sorted(self.peak_tflops))}): choose another precision or give "
                f'"peak_tflops": {{"{precision}": ...}} in the system file'
            )
        return tf * 1e12

    def fraction(self, precision: str) -> float:
        """The large-GEMM rate over the peak at ``precision`` (a measured one when a table
        gave it; fp16 runs at bf16's)."""
        f = self.matmul_fractions
        return (
            f.get(precision) or f.get("bf16" if precision == "fp16" else "") or self.matmul_fraction
        )

    def waves(self, m: int, n: int) -> float:
        return waves(m, n, self.sms)

    def gemm_s(self, m: int, n: int, k: int, precision: str) -> float:
        """Seconds of one (m x k) @ (k x n) GEMM (``_gemm``'s model)."""
        flops = 2.0 * m * n * k
        rate = self.peak(precision) * self.fraction(precision) * self.waves(m, n)
        nbytes = (m * k + k * n + m * n) * ELEMENT_BYTES[precision]
        t = max(flops / rate, nbytes / self.hbm_bytes_s) + self.gemm_fixed_s
        if self.gemm_shapes is not None:  # a measured table's residual at this shape
            t *= self.gemm_shapes.ratio(m, n, k, precision)
        return t * self.compute_time_scale

    @property
    def compute_time_scale(self) -> float:
        """What GEMM and attention times are multiplied by: the sustained clock's loss over
        the anchored compute factor."""
        return self.sustained / self.compute_factor

    def attention_s(
        self,
        batch: int,
        heads: int,
        seq: int,
        head_dim: int,
        causal: bool,
        precision: str,
        kernel: str = "auto",
    ) -> tuple[float, float]:
        """(forward, backward) seconds of a fused attention kernel over ``heads`` heads: the
        measured rate where a measured table timed this kernel, else the published rate of
        ``kernel`` on this GPU by head dimension and sequence length (``_attention``), else the
        attention fractions of the bf16 peak."""
        fwd = 4.0 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
        low = precision in ("fp8", "nvfp4")
        peak = self.peak("bf16" if low else precision)  # attention stays in 16 bit
        k = resolve(kernel, self.name)
        found = None
        if self.attention_measured and k == self.attention_measured:
            found = rates(self.attention_curves, head_dim, seq, causal)
        if found is None:
            found = table_rates(kernel, self.name, head_dim, seq, causal)
        if found is None:
            s = slowdown(k)
            found = (peak * self.attn_fwd_fraction / s, peak * self.attn_bwd_fraction / s)
        return (
            (fwd / found[0] + self.gemm_fixed_s) * self.compute_time_scale,
            (2.5 * fwd / found[1] + 2 * self.gemm_fixed_s) * self.compute_time_scale,
        )

    @property
    def hbm_bytes_s(self) -> float:
        return self.hbm_GBps * 1e9 * self.hbm_fraction

    def memory_s(self, nbytes: float, kernels: int = 1) -> float:
        """Seconds of memory-bound kernels moving ``nbytes`` in all."""
        return nbytes / self.hbm_bytes_s + kernels * self.gemm_fixed_s

    def calibrated(
        self,
        table: Mapping[str, Any] | Iterable[Mapping[str, Any]],
        source: str,
        shapes: bool = True,
    ) -> DeviceModel:
        """This device with its efficiencies fitted to measured rows (see the module doc).

        ``table``: rows with an "op" ("gemm", "attention", "copy"), or the measured table's
        layout (``bench/gpu_device_model.py``): lists under "gemm", "attention", "memory".
        ``shapes``: keep each GEMM shape's residual over the fit (``_gemm_shapes``); off for
        a table whose shapes stop below the layer shapes (XLA's public table, dimensions up to
        4096), where the fit alone extrapolates better."""
        rows = _rows(table)
        gemms = [r for r in rows if r.get("op") == "gemm" and float(r.get("tflops") or 0) > 0]
        dev = self
        basis = dict(self.basis)
        copy_gbps = _dram_copy_GBps(rows)
        if isinstance(table, Mapping) and table.get("memcpy_GBps"):
            copy_gbps.append(float(table["memcpy_GBps"]))
        if any(copy_gbps):
            dev = replace(dev, hbm_fraction=min(1.0, max(copy_gbps) / self.hbm_GBps))
            basis["hbm"] = (
                f"measured copy rate of {source}: {max(copy_gbps):.0f} GB/s of "
                f"{self.hbm_GBps:.0f} (the largest copies, beyond the L2 cache)"
            )
        if gemms:
            fractions: dict[str, float] = {}
            fixed: dict[str, tuple[int, float]] = {}
            for prec in sorted({str(r.get("dtype", "bf16")) for r in gemms}):
                if prec not in ELEMENT_BYTES or prec not in self.peak_tflops:
                    continue  # a precision the planner does not time (tf32, fp32)
                # t_i = x_i / f + t0, x_i = flops / (peak * waves): least squares in (1/f, t0);
                # a batch of b GEMMs is one of b x m rows
                xs, ts = [], []
                for r in (r for r in gemms if str(r.get("dtype", "bf16")) == prec):
                    m = int(r["m"]) * int(r.get("batch", 1))
                    n, k = int(r["n"]), int(r["k"])
                    flops = 2.0 * m * n * k
                    xs.append(flops / (self.peak(prec) * self.waves(m, n)))
                    ts.append(flops / (float(r["tflops"]) * 1e12))
                inv_f, t0 = fit_line(xs, ts)
                fractions[prec] = 1.0 / inv_f
                fixed[prec] = (len(xs), t0)
            if fractions:
                main = "bf16" if "bf16" in fractions else max(fixed, key=lambda p: fixed[p][0])
                dev = replace(
                    dev,
                    matmul_fraction=fractions[main],
                    matmul_fractions=fractions,
                    gemm_fixed_s=fixed[main][1],
                    gemm_shapes=None,
                )
                basis["matmul"] = (
                    f"least squares over {len(gemms)} measured GEMMs of {source} "
                    f"({', '.join(f'{p} {f:.3f}' for p, f in fractions.items())})"
                )
                if shapes:
                    timed = [r for r in gemms if str(r.get("dtype", "bf16")) in fractions]
                    table_ = ShapeTable.of(timed, dev.gemm_s, source)
                    dev = replace(dev, gemm_shapes=table_)
                    basis["matmul"] += (
                        f"; each shape's residual over its measured neighbours in log2 m, n, "
                        f"k ({len(table_)} rows)"
                    )
        attn = [r for r in rows if r.get("op") == "attention"]
        if attn:
            peak = self.peak("bf16") / 1e12
            fwd = sorted(float(r["fwd_tflops"]) / peak for r in attn if r.get("fwd_tflops"))
            bwd = sorted(float(r["bwd_tflops"]) / peak for r in attn if r.get("bwd_tflops"))
            if fwd:
                dev = replace(dev, attn_fwd_fraction=fwd[len(fwd) // 2])
            if bwd:
                dev = replace(dev, attn_bwd_fraction=bwd[len(bwd) // 2])
            doc = table if isinstance(table, Mapping) else {}
            torch = doc.get("versions", {}).get("torch")
            # a profiler trace names the kernel that ran; a benchmark table its PyTorch version
            kernel = str(doc.get("attention_kernel") or sdpa_kernel(torch, self.name))
            dev = replace(dev, attention_measured=kernel, attention_curves=curves(attn))
            basis["attention"] = (
                f"{len(attn)} measured attention rows of {source} (PyTorch {torch or '?'}: "
                f"{kernel}) by head dimension and sequence length; their median where a row "
                "lacks them"
            )
        hot = table.get("sustained") if isinstance(table, Mapping) else None
        if hot is not None:
            dev = replace(dev, sustained=_sustained(hot, source))
            basis["sustained"] = (
                f"GEMMs {dev.sustained:.3f}x slower after {hot.get('heat_s', '?')} s of "
                f"training steps than after an idle ({hot.get('source', source)}, "
                f"{hot.get('date', 'undated')})"
            )
        if not (gemms or attn or any(copy_gbps)):
            raise PlanError(
                f"efficiency table {source} has no usable rows: expected rows "
                '{"op": "gemm", "m", "n", "k", "dtype", "tflops"} or {"op": "attention", ...}'
            )
        return replace(dev, basis=basis)


#: The range of a plausible hot over cold GEMM time: a GPU that sustains under 2/3 of its
#: burst rate, or runs faster hot than cold by more than the timing noise, is mis-measured.
SUSTAINED_RANGE = (0.95, 1.5)


def _sustained(entry: Any, source: str) -> float:
    """The ``sustained`` entry's hot over cold GEMM time, checked."""
    value = entry.get("gemm_hot_over_cold") if isinstance(entry, Mapping) else None
    lo, hi = SUSTAINED_RANGE
    if not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise PlanError(
            f"efficiency table {source}: sustained.gemm_hot_over_cold is {value!r}; expected "
            f"the hot over cold GEMM time, a number from {lo} to {hi} (bench/gpu_sustained.py "
            "writes it); remove the sustained entry to time the GPU at its burst rate"
        )
    return float(value)


def _rows(table: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every row of a table, each with its "op"."""
    if not isinstance(table, Mapping):
        return list(table)
    rows: list[Mapping[str, Any]] = list(table.get("rows", table.get("measurements", [])))
    for part in ("gemm", "attention"):
        rows.extend({"op": part, **r} for r in table.get(part, []) if isinstance(r, Mapping))
    rows.extend(r for r in table.get("memory", []) if isinstance(r, Mapping))
    return rows


def _dram_copy_GBps(rows: Iterable[Mapping[str, Any]]) -> list[float]:  # noqa: N802 (GB/s)
    """The copy rates of the largest copies measured: a copy that fits the L2 cache (50 MB on
    H100 and H200) runs above the HBM rate; rows without a size count as large."""
    copies = [r for r in rows if r.get("op") in ("memcpy", "copy")]
    sizes = [int(r.get("bytes") or 0) for r in copies]
    top = max(sizes, default=0)
    return [
        float(r.get("GBps") or r.get("gbps") or 0)
        for r, n in zip(copies, sizes, strict=True)
        if n == top or n == 0
    ]
