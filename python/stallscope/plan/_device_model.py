"""The device model: how long a GEMM, a flash-attention kernel or a memory-bound kernel takes on
one GPU, from its datasheet figures and an efficiency curve that a measured table calibrates.

GEMM (m x k) @ (k x n), 2mnk FLOPs:

    t = max(2mnk / (peak x matmul_fraction x waves(m, n)), bytes / (hbm x hbm_fraction)) + fixed

* ``matmul_fraction``: the large-GEMM rate over the dense peak (default: the public MAMF
  measurement of the GPU, plan/data/efficiency.json);
* ``waves(m, n)``: wave quantization, the share of the last wave of 128 x 256 output tiles that
  keeps the SMs busy (1 when the SM count is unknown);
* ``fixed``: launch and tile-pipeline fill per kernel.

A table of measured GEMMs (rows m, n, k, dtype, tflops: ``predict/data/efficiency/<GPU>.json``,
or kernel times from a profile with their shapes) calibrates ``matmul_fraction`` and ``fixed``
by least squares over the rows' times; its attention rows give the attention fractions, its
memory-copy row the HBM fraction (``DeviceModel.calibrated``).

Fused attention: forward FLOPs 4 b s^2 h_d a (half when causal), backward 2.5 x forward, at the
kernel's published rate by head dimension and sequence length (``_attention``: FlashAttention-2,
FlashAttention-3 and cuDNN on H100), else at ``attn_fwd_fraction`` / ``attn_bwd_fraction`` of
the peak (FlashAttention-2's on A100). Memory-bound kernels (norms,
activations, residual adds, the optimizer): bytes / (hbm x hbm_fraction) + fixed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from stallscope.plan._attention import resolve, slowdown, table_rates
from stallscope.plan._errors import PlanError

_TILE_M, _TILE_N = 128, 256  # output tile of a large bf16 GEMM on Ampere / Hopper tensor cores
ELEMENT_BYTES: dict[str, float] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}


@cache
def efficiency_defaults() -> dict[str, Any]:
    """plan/data/efficiency.json: the default efficiencies and their sources."""
    doc: dict[str, Any] = json.loads(
        Path(__file__).with_name("data").joinpath("efficiency.json").read_text()
    )
    return doc


def default_matmul_fraction(gpu: str) -> tuple[float, str]:
    """The MAMF fraction of ``gpu`` (by family name: "A100-SXM4-80GB" -> "A100"), else of a GPU
    of the same die and clocks ("H200-SXM" -> H100's), and its basis."""
    doc = efficiency_defaults()
    table = doc["matmul_tflops"]
    devices: dict[str, dict[str, float]] = table["devices"]
    names = [gpu.upper().replace(" ", "-")]
    for family in doc.get("table_families", {}).get("families", []):
        if any(names[0].startswith(f.upper()) for f in family):
            names += [f.upper() for f in family]
    for up in names:
        best = ""
        for fam in devices:
            if up.startswith(fam.upper()) and len(fam) > len(best):
                if fam.upper() == "A100-PCIE" and "PCIE" not in up:
                    continue
                best = fam
        if best:
            d = devices[best]
            same = "" if up == names[0] else f" (same die as {gpu})"
            return d["tflops"] / d[
                "peak"
            ], f"MAMF of {best}: {d['tflops']} of {d['peak']} TFLOP/s{same}"
    return float(table["default_fraction"]), str(table["default_fraction_basis"])


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
    attention_measured: bool = False  # the attention fractions come from a measured table
    basis: Mapping[str, str] = field(default_factory=dict)

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s at ``precision``."""
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
        if self.sms <= 0:
            return 1.0
        tiles = math.ceil(m / _TILE_M) * math.ceil(n / _TILE_N)
        return tiles / (math.ceil(tiles / self.sms) * self.sms)

    def gemm_s(self, m: int, n: int, k: int, precision: str) -> float:
        """Seconds of one (m x k) @ (k x n) GEMM."""
        flops = 2.0 * m * n * k
        rate = self.peak(precision) * self.fraction(precision) * self.waves(m, n)
        nbytes = (m * k + k * n + m * n) * ELEMENT_BYTES[precision]
        return max(flops / rate, nbytes / self.hbm_bytes_s) + self.gemm_fixed_s

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
        published rate of ``kernel`` on this GPU by head dimension and sequence length
        (``_attention``), else (no table for the GPU, or a measured table's FlashAttention-2
        rows) the attention fractions of the bf16 peak."""
        fwd = 4.0 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
        peak = self.peak("bf16" if precision == "fp8" else precision)  # attention stays in 16 bit
        k = resolve(kernel, self.name)
        rates = None
        if not (self.attention_measured and k == "flash2"):
            rates = table_rates(kernel, self.name, head_dim, seq, causal)
        if rates is None:
            s = slowdown(k)
            rates = (peak * self.attn_fwd_fraction / s, peak * self.attn_bwd_fraction / s)
        return (
            fwd / rates[0] + self.gemm_fixed_s,
            2.5 * fwd / rates[1] + 2 * self.gemm_fixed_s,
        )

    @property
    def hbm_bytes_s(self) -> float:
        return self.hbm_GBps * 1e9 * self.hbm_fraction

    def memory_s(self, nbytes: float, kernels: int = 1) -> float:
        """Seconds of memory-bound kernels moving ``nbytes`` in all."""
        return nbytes / self.hbm_bytes_s + kernels * self.gemm_fixed_s

    def calibrated(
        self, table: Mapping[str, Any] | Iterable[Mapping[str, Any]], source: str
    ) -> DeviceModel:
        """This device with its efficiencies fitted to measured rows (see the module doc).

        ``table``: rows with an "op" ("gemm", "attention", "copy"), or the measured table's
        layout (``bench/gpu_device_model.py``): lists under "gemm", "attention", "memory"."""
        rows = _rows(table)
        gemms = [r for r in rows if r.get("op") == "gemm" and float(r.get("tflops") or 0) > 0]
        dev = self
        basis = dict(self.basis)
        if gemms:
            fractions: dict[str, float] = {}
            fixed: dict[str, tuple[int, float]] = {}
            for prec in sorted({str(r.get("dtype", "bf16")) for r in gemms}):
                if prec not in ELEMENT_BYTES or prec not in self.peak_tflops:
                    continue  # a precision the planner does not time (tf32, fp32)
                # t_i = x_i / f + t0, x_i = flops / (peak * waves): least squares in (1/f, t0)
                xs, ts = [], []
                for r in (r for r in gemms if str(r.get("dtype", "bf16")) == prec):
                    m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
                    flops = 2.0 * m * n * k
                    xs.append(flops / (self.peak(prec) * self.waves(m, n)))
                    ts.append(flops / (float(r["tflops"]) * 1e12))
                inv_f, t0 = _fit_line(xs, ts)
                fractions[prec] = 1.0 / inv_f
                fixed[prec] = (len(xs), t0)
            if fractions:
                main = "bf16" if "bf16" in fractions else max(fixed, key=lambda p: fixed[p][0])
                dev = replace(
                    dev,
                    matmul_fraction=fractions[main],
                    matmul_fractions=fractions,
                    gemm_fixed_s=fixed[main][1],
                )
                basis["matmul"] = (
                    f"least squares over {len(gemms)} measured GEMMs of {source} "
                    f"({', '.join(f'{p} {f:.3f}' for p, f in fractions.items())})"
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
            dev = replace(dev, attention_measured=True)
            basis["attention"] = f"median of {len(attn)} measured attention rows of {source}"
        copy_gbps = [
            float(r.get("GBps") or r.get("gbps") or 0)
            for r in rows
            if r.get("op") in ("memcpy", "copy")
        ]
        if isinstance(table, Mapping) and table.get("memcpy_GBps"):
            copy_gbps.append(float(table["memcpy_GBps"]))
        if any(copy_gbps):
            dev = replace(dev, hbm_fraction=min(1.0, max(copy_gbps) / self.hbm_GBps))
            basis["hbm"] = f"measured copy rate of {source}"
        if not (gemms or attn or any(copy_gbps)):
            raise PlanError(
                f"efficiency table {source} has no usable rows: expected rows "
                '{"op": "gemm", "m", "n", "k", "dtype", "tflops"} or {"op": "attention", ...}'
            )
        return replace(dev, basis=basis)


def _rows(table: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every row of a table, each with its "op"."""
    if not isinstance(table, Mapping):
        return list(table)
    rows: list[Mapping[str, Any]] = list(table.get("rows", table.get("measurements", [])))
    for part in ("gemm", "attention"):
        rows.extend({"op": part, **r} for r in table.get(part, []) if isinstance(r, Mapping))
    rows.extend(r for r in table.get("memory", []) if isinstance(r, Mapping))
    return rows


def _fit_line(xs: list[float], ts: list[float]) -> tuple[float, float]:
    """Slope and intercept (>= 0) of ts over xs by least squares."""
    n = len(xs)
    if n == 1:
        return ts[0] / xs[0], 0.0
    mx, mt = sum(xs) / n, sum(ts) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (t - mt) for x, t in zip(xs, ts, strict=True)) / sxx if sxx else mt / mx
    icept = mt - slope * mx
    if icept < 0:  # no negative fixed cost: refit through the origin
        slope, icept = sum(x * t for x, t in zip(xs, ts, strict=True)) / sum(x * x for x in xs), 0.0
    return slope, icept
