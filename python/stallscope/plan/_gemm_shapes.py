"""Per-shape GEMM rates from a measured table: what the one-line GEMM model misses at a shape.

The GEMM model (``_gemm``) has one rate per precision, fitted over every measured shape. The
measured rows scatter around it by shape: on the H200 table, bf16 GEMMs with a short inner
dimension (the attention projection under TP 8, k = h / 8) take 1.4x the fitted time, fp8
ones 2.2x, while wide FFN GEMMs run 5 % faster. ``ShapeTable`` keeps each measured row's
log ratio of measured to modelled time and gives a GEMM of any shape the kernel-weighted mean
of its neighbours' ratios in log2(m), log2(n), log2(k):

    ratio(q) = exp(sum_i w_i ln r_i / (sum_i w_i + w_0)),  w_i = exp(-|q - p_i|^2 / 2)

with a bandwidth of one octave per dimension (the tables step shapes by 2x to 4x) and a
neutral prior ``w_0`` (a row of ratio 1 two octaves away), so a shape far from every measured
row keeps the fitted model and a measured shape gets close to its own time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: Kernel bandwidth in octaves (log2 units) per dimension.
BANDWIDTH: Final = 1.0
#: The prior's weight: a neutral row (ratio 1) two octaves from the query.
PRIOR_WEIGHT: Final = math.exp(-((2.0 / BANDWIDTH) ** 2) / 2)
#: Rows further than this (octaves) add under 1e-4 of a row's weight: skipped.
_CUTOFF2: Final = (4.3 * BANDWIDTH) ** 2


@dataclass(frozen=True, eq=False)  # identity hash: a device model holds one, lookups cache on it
class ShapeTable:
    """Measured over modelled GEMM time by shape, per precision (see the module doc)."""

    rows: Mapping[str, tuple[tuple[float, float, float, float], ...]]  # (lg m, lg n, lg k, ln r)
    source: str = ""
    _memo: dict[tuple[str, int, int, int], float] = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls,
        gemms: Iterable[Mapping[str, Any]],
        model_s: Callable[[int, int, int, str], float],
        source: str,
    ) -> ShapeTable:
        """The table of measured rows ``gemms`` (m, n, k, dtype, tflops; batch counts as m)
        against ``model_s(m, n, k, dtype)``, the fitted model's seconds."""
        out: dict[str, list[tuple[float, float, float, float]]] = {}
        for r in gemms:
            m = int(r["m"]) * int(r.get("batch", 1))
            n, k, prec = int(r["n"]), int(r["k"]), str(r.get("dtype", "bf16"))
            measured = 2.0 * m * n * k / (float(r["tflops"]) * 1e12)
            modelled = model_s(m, n, k, prec)
            if measured > 0 and modelled > 0:
                point = (math.log2(m), math.log2(n), math.log2(k))
                out.setdefault(prec, []).append((*point, math.log(measured / modelled)))
        return cls({p: tuple(v) for p, v in out.items()}, source)

    def ratio(self, m: int, n: int, k: int, precision: str) -> float:
        """Measured over modelled time expected for an (m x k) @ (k x n) GEMM (fp16 reads
        bf16's rows where the table has none of its own); 1 without rows near it."""
        key = (precision, m, n, k)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        rows = self.rows.get(precision) or (
            self.rows.get("bf16", ()) if precision == "fp16" else ()
        )
        q = (math.log2(max(m, 1)), math.log2(max(n, 1)), math.log2(max(k, 1)))
        num, den = 0.0, PRIOR_WEIGHT
        for lm, ln_, lk, y in rows:
            d2 = (q[0] - lm) ** 2 + (q[1] - ln_) ** 2 + (q[2] - lk) ** 2
            if d2 < _CUTOFF2:
                w = math.exp(-d2 / (2 * BANDWIDTH**2))
                num += w * y
                den += w
        out = math.exp(num / den)
        self._memo[key] = out
        return out

    def __len__(self) -> int:
        return sum(len(v) for v in self.rows.values())
