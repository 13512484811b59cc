"""The GEMM time model and the public measurements that set its constants.

A GEMM of batch x (m x k) @ (k x n) takes

    t = max(2 b m n k / (peak x fraction x waves), bytes / HBM) + fixed

* ``waves``: wave quantization, the share of the last wave of 128 x 128 output tiles that keeps
  the SMs busy (1 when the SM count is unknown);
* ``fraction`` and ``fixed``: the large-GEMM rate over the dense peak, per precision, and the
  launch-to-first-tile time.

The constants come from public measurements (``plan/data``): a shape table (XLA's H100 bf16
table, ``gemm_tables.json``) fits ``fraction`` and ``fixed`` by least squares; elsewhere the
fraction is the one for which this model gives the measured time of the GPU's maximum
achievable matmul (MAMF, ``efficiency.json``) at its shape; an fp8 fraction keeps its MAMF
ratio to bf16 when a bf16 shape table calibrates the GPU.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

from stallscope.predict._matmul_rates import rate_row

TILE: Final = 128  # output tile edge of cuBLAS's layer-sized GEMM kernels on Ampere / Hopper
_DATA: Final = Path(__file__).with_name("data")


@cache
def _json(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_DATA.joinpath(name).read_text())
    return doc


def efficiency_defaults() -> dict[str, Any]:
    """plan/data/efficiency.json: the default efficiencies and their sources."""
    return _json("efficiency.json")


def waves(m: int, n: int, sms: int) -> float:
    """The share of the GEMM's last wave of output tiles that keeps the SMs busy."""
    if sms <= 0:
        return 1.0
    tiles = math.ceil(m / TILE) * math.ceil(n / TILE)
    return tiles / (math.ceil(tiles / sms) * sms)


def family_names(gpu: str) -> list[str]:
    """``gpu`` first, then the GPUs of the same die and clocks (efficiency.json's families)."""
    names = [gpu.upper().replace(" ", "-")]
    for family in efficiency_defaults().get("table_families", {}).get("families", []):
        if any(names[0].startswith(f.upper()) for f in family):
            names += [f.upper() for f in family if f.upper() not in names]
    return names


def mamf_entry(gpu: str, precision: str) -> tuple[str, dict[str, Any]] | None:
    """The MAMF measurement of ``gpu`` at ``precision`` (fp16: its own row where one was
    measured, on GPUs without bf16 such as V100 and T4, else bf16's), by family name
    (``stallscope.predict``'s ``rate_row``: "A100-SXM4-80GB" -> "A100", never "L40S" ->
    "L4"), else of a GPU of the same die and clocks; None if none."""
    precs = ("fp16", "bf16") if precision == "fp16" else (precision,)
    for up in family_names(gpu):
        for prec in precs:
            found = rate_row(up, prec)
            if found is not None:
                return found
    return None


def fraction_at(tflops: float, shape: tuple[int, int, int], peak: float, fixed: float) -> float:
    """The fraction of ``peak`` (FLOP/s) for which the model gives the time of a GEMM of
    ``shape`` (m, n, k) measured at ``tflops``, ``fixed`` s included. The shape is a brute-force
    search's best: its last wave is taken as full."""
    m, n, k = shape
    flops = 2.0 * m * n * k
    return flops / (peak * (flops / (tflops * 1e12) - fixed))


def mamf_fractions(
    gpu: str, peaks: Mapping[str, float], fixed: float
) -> dict[str, tuple[float, str]]:
    """Per precision, the GEMM fraction that reproduces the GPU's MAMF measurement (or its
    die's) at its shape, and its basis."""
    out: dict[str, tuple[float, str]] = {}
    for prec in ("bf16", "fp16", "fp8"):
        if prec not in peaks or (prec == "fp16" and "bf16" in peaks):  # fp16 runs at bf16's
            continue
        found = mamf_entry(gpu, prec)
        if found is None:
            continue
        fam, e = found
        tflops = float(e["tflops"])
        if e.get("shape"):
            m, n, k = (int(x) for x in str(e["shape"]).split("x"))
            f = fraction_at(tflops, (m, n, k), peaks[prec] * 1e12, fixed)
            at = f"at {e['shape']}"
        else:  # the best of square sizes, which one unpublished: the rate over the peak
            f = tflops / peaks[prec]
            at = "(shape unpublished)"
        out[prec] = (f, f"{prec} {f:.3f}: MAMF of {fam}, {e['tflops']} TFLOP/s {at}")
    return out


def gemm_tables(gpu: str) -> list[dict[str, Any]]:
    """The public shape tables (gemm_tables.json) that cover ``gpu`` or its family."""
    names = family_names(gpu)
    return [
        t
        for t in _json("gemm_tables.json")["tables"]
        if any(n.startswith(g.upper()) for g in t["gpus"] for n in names)
    ]


def fit_line(xs: list[float], ts: list[float]) -> tuple[float, float]:
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
