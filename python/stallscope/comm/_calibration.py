"""Alpha-beta calibration: fit the cost models of stallscope.comm._formulas to a measured sweep, and
the calibration file that prediction reads.

Fit. For each (collective, tier, place, group size), over the sizes >= ``min_fit_bytes`` (below
64 KB this machine's timer makes latency unmeasurable), fit ``t = c0 + c1 * n`` minimising the
*relative* error (weighted least squares, weights 1/t), because sizes span decades and the check is
relative. Then alpha = c0 / latency_terms and beta = c1 / bandwidth_terms of the collective's default
algorithm, so 1/beta is the bus bandwidth. A negative intercept (the timer cannot resolve alpha) is
refitted through the origin (alpha = 0) and flagged. Quality: R^2 of the times, the largest and mean
relative error of the fitted times on the fitted points. The time fitted per size is by default
the block median (stallscope.comm._harness.block_median: CPU runs time each operation; the median
over blocks of >= 1 MiB of consecutive operations resists scheduler hiccups on a shared machine and
the carry-over between back-to-back operations), else nccl-tests' mean over the timed loop.

Calibration file (JSON, ``format`` = "stallscope.comm.calibration", ``version`` = 1)::

    {
      "format": "stallscope.comm.calibration", "version": 1,
      "created": ISO-8601 UTC, "host": str, "backend": "gloo" | "nccl",
      "world_size": int, "nnodes": int, "min_fit_bytes": int,
      "link": {"rate_bps": float | null, "rate": str, "mtu": int, "source": str} | null,
                                     # the shaped link it ran on (stallscope testbed), if known
      "fits": [{
          "collective": str, "tier": "intra_node" | "inter_node" | "mixed",
          "place": "in" | "out", "group_size": int, "algorithm": str,
          "alpha_s": float,            # latency per algorithm step, seconds
          "beta_s_per_byte": float,    # seconds per byte on the link (1 / bandwidth)
          "bandwidth_Bps": float,      # 1 / beta: bus bandwidth, bytes per second
          "intercept_s": float, "slope_s_per_byte": float,   # the raw fit t = c0 + c1 n
          "alpha_clipped": bool,       # the free fit gave c0 < 0; refitted with c0 = 0
          "points": int, "min_bytes": int, "max_bytes": int,
          "r2": float, "max_rel_error": float, "mean_rel_error": float,
          "statistic": "block_median" | "mean"   # which time per size was fitted
      }, ...],
      "measurements": [rows of the bench report used for the fit]
    }

``Calibration.load(path).seconds(collective, nbytes, group_size, tier)`` predicts with it.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from stallscope.comm import _formulas

CALIBRATION_FORMAT = "stallscope.comm.calibration"
CALIBRATION_VERSION = 1
#: Below this size a message's time is timer noise on these machines (cpu-testbed.md).
MIN_FIT_BYTES = 64 * 1024


@dataclass(frozen=True)
class LinearFit:
    intercept_s: float
    slope_s_per_byte: float
    clipped: bool
    r2: float
    max_rel_error: float
    mean_rel_error: float
    points: int


def fit_linear(nbytes: Sequence[float], seconds: Sequence[float]) -> LinearFit:
    """Fit t = c0 + c1 n minimising relative error; c0 >= 0 (refit through 0 if negative)."""
    if len(nbytes) != len(seconds):
        raise ValueError(f"{len(nbytes)} sizes but {len(seconds)} times")
    pts = [(float(n), float(t)) for n, t in zip(nbytes, seconds, strict=True)]
    if any(t <= 0 or not math.isfinite(t) for _, t in pts):
        raise ValueError("every time must be finite and > 0 s")
    if len({n for n, _ in pts}) < 2:
        raise ValueError(
            "an alpha-beta fit needs at least two different sizes at or above the minimum fit "
            "size: widen the sweep (--max-bytes) or lower --min-fit-bytes"
        )
    # Weighted least squares with weights w = 1/t^2 on the residuals (relative error).
    sw = swx = swy = swxx = swxy = 0.0
    for n, t in pts:
        w = 1.0 / (t * t)
        sw += w
        swx += w * n
        swy += w * t
        swxx += w * n * n
        swxy += w * n * t
    det = sw * swxx - swx * swx
    c1 = (sw * swxy - swx * swy) / det
    c0 = (swy - c1 * swx) / sw
    clipped = False
    if c0 < 0 or c1 <= 0:
        clipped = c0 < 0
        c0 = 0.0
        c1 = swxy / swxx  # through the origin, same weights
    pred = [c0 + c1 * n for n, _ in pts]
    rel = [abs(p - t) / t for p, (_, t) in zip(pred, pts, strict=True)]
    mean_t = sum(t for _, t in pts) / len(pts)
    ss_tot = sum((t - mean_t) ** 2 for _, t in pts)
    ss_res = sum((p - t) ** 2 for p, (_, t) in zip(pred, pts, strict=True))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return LinearFit(c0, c1, clipped, r2, max(rel), sum(rel) / len(rel), len(pts))


def results_frame(report: dict[str, Any]) -> pl.DataFrame:
    """The rows of a bench report as a frame (one row per collective, tier, place, size)."""
    rows = report.get("results", [])
    cols = [
        "collective",
        "tier",
        "place",
        "group_size",
        "nnodes",
        "bytes",
        "count",
        "dtype",
        "iters",
        "time_ns",
        "time_min_ns",
        "time_max_ns",
        "algbw_Bps",
        "busbw_Bps",
        "block_median_ns",
        "check_error",
        "runq_wait_ns",
    ]
    schema = {
        "collective": pl.String,
        "tier": pl.String,
        "place": pl.String,
        "group_size": pl.Int64,
        "nnodes": pl.Int64,
        "bytes": pl.Int64,
        "count": pl.Int64,
        "dtype": pl.String,
        "iters": pl.Int64,
        "time_ns": pl.Float64,
        "time_min_ns": pl.Float64,
        "time_max_ns": pl.Float64,
        "algbw_Bps": pl.Float64,
        "busbw_Bps": pl.Float64,
        "block_median_ns": pl.Float64,
        "check_error": pl.Float64,
        "runq_wait_ns": pl.Float64,
    }
    return pl.DataFrame([{c: r.get(c) for c in cols} for r in rows], schema=schema)


def fit_frame(
    results: pl.DataFrame, min_fit_bytes: int = MIN_FIT_BYTES, statistic: str = "block_median"
) -> pl.DataFrame:
    """One alpha-beta fit per (collective, tier, place, group_size) from a results frame.

    statistic: "block_median" fits the block median (robust to scheduler hiccups on a shared
    machine; falls back to the mean where it was not measured), "mean" the nccl-tests mean.
    Groups with fewer than two sizes >= min_fit_bytes are left out (the caller reports them)."""
    if statistic not in ("block_median", "mean"):
        raise ValueError(f"statistic must be block_median or mean, got {statistic!r}")
    keys = ["collective", "tier", "place", "group_size"]
    usable = results.filter(pl.col("bytes") >= min_fit_bytes)
    out: list[dict[str, Any]] = []
    for key, grp in usable.group_by(keys, maintain_order=True):
        coll, tier, place, p = (str(key[0]), str(key[1]), str(key[2]), int(str(key[3])))
        if grp["bytes"].n_unique() < 2:
            continue
        t_ns = grp["time_ns"]
        if statistic == "block_median":
            med = grp["block_median_ns"]
            t_ns = pl.select(
                pl.when(med.is_null() | (med <= 0)).then(t_ns).otherwise(med)
            ).to_series()
        fit = fit_linear(grp["bytes"].to_list(), (t_ns * 1e-9).to_list())
        terms = _formulas.cost_terms(coll, p)
        alpha = fit.intercept_s / terms.latency_terms if terms.latency_terms else 0.0
        beta = fit.slope_s_per_byte / terms.bandwidth_terms if terms.bandwidth_terms else 0.0
        out.append(
            {
                "collective": coll,
                "tier": tier,
                "place": place,
                "group_size": p,
                "algorithm": _formulas.ALGORITHMS[coll][0],
                "alpha_s": alpha,
                "beta_s_per_byte": beta,
                "bandwidth_Bps": 1.0 / beta if beta > 0 else math.inf,
                "intercept_s": fit.intercept_s,
                "slope_s_per_byte": fit.slope_s_per_byte,
                "alpha_clipped": fit.clipped,
                "points": fit.points,
                "min_bytes": int(grp["bytes"].min()),  # type: ignore[arg-type]
                "max_bytes": int(grp["bytes"].max()),  # type: ignore[arg-type]
                "r2": fit.r2,
                "max_rel_error": fit.max_rel_error,
                "mean_rel_error": fit.mean_rel_error,
                "statistic": statistic,
            }
        )
    schema: dict[str, Any] = {
        "collective": pl.String,
        "tier": pl.String,
        "place": pl.String,
        "group_size": pl.Int64,
        "algorithm": pl.String,
        "alpha_s": pl.Float64,
        "beta_s_per_byte": pl.Float64,
        "bandwidth_Bps": pl.Float64,
        "intercept_s": pl.Float64,
        "slope_s_per_byte": pl.Float64,
        "alpha_clipped": pl.Boolean,
        "points": pl.Int64,
        "min_bytes": pl.Int64,
        "max_bytes": pl.Int64,
        "r2": pl.Float64,
        "max_rel_error": pl.Float64,
        "mean_rel_error": pl.Float64,
        "statistic": pl.String,
    }
    return pl.DataFrame(out, schema=schema)


def write_calibration(
    path: str | Path,
    report: dict[str, Any],
    min_fit_bytes: int = MIN_FIT_BYTES,
    statistic: str = "block_median",
) -> pl.DataFrame:
    """Fit the report's sweep and write the calibration file; returns the fits."""
    results = results_frame(report)
    fits = fit_frame(results, min_fit_bytes, statistic)
    if fits.height == 0:
        raise ValueError(
            f"nothing to calibrate: no collective has two or more sizes >= {min_fit_bytes} bytes; "
            "raise --max-bytes"
        )
    doc = {
        "format": CALIBRATION_FORMAT,
        "version": CALIBRATION_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": report.get("host"),
        "backend": report.get("backend"),
        "world_size": report.get("world_size"),
        "nnodes": report.get("nnodes"),
        "min_fit_bytes": min_fit_bytes,
        "link": report.get("link"),
        "fits": fits.to_dicts(),
        "measurements": report.get("results", []),
    }
    Path(path).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return fits


class Calibration:
    """A calibration file, read back for prediction."""

    def __init__(self, doc: dict[str, Any], source: str = "<memory>") -> None:
        if doc.get("format") != CALIBRATION_FORMAT:
            raise ValueError(
                f"{source} is not a stallscope calibration file (format {doc.get('format')!r}); "
                "write one with `stallscope bench comm --calibrate FILE`"
            )
        if doc.get("version") != CALIBRATION_VERSION:
            raise ValueError(
                f"{source} has calibration version {doc.get('version')}, this stallscope reads "
                f"{CALIBRATION_VERSION}: re-run the calibration"
            )
        if not doc.get("fits"):
            raise ValueError(f"{source} holds no fits: re-run the calibration with a wider sweep")
        self.doc = doc
        self.fits = pl.DataFrame(doc["fits"])
        self.source = source

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        p = Path(path)
        try:
            doc = orjson.loads(p.read_bytes())
        except FileNotFoundError:
            raise ValueError(f"calibration file {p} does not exist") from None
        except orjson.JSONDecodeError as e:
            raise ValueError(f"calibration file {p} is not valid JSON ({e})") from None
        return cls(doc, str(p))

    def alpha_beta(
        self, collective: str, tier: str, place: str | None = None
    ) -> tuple[float, float]:
        """(alpha s, beta s/byte) of a collective on a tier; in-place fits are preferred."""
        f = self.fits.filter((pl.col("collective") == collective) & (pl.col("tier") == tier))
        if place is not None:
            f = f.filter(pl.col("place") == place)
        if f.height == 0:
            have = sorted(
                {(str(c), str(t)) for c, t in self.fits.select("collective", "tier").rows()}
            )
            raise KeyError(f"{self.source} has no fit for {collective} on {tier}; it has {have}")
        f = f.sort(["place", "group_size"])  # "in" before "out"
        return float(f["alpha_s"][0]), float(f["beta_s_per_byte"][0])

    def seconds(self, collective: str, nbytes: float, group_size: int, tier: str) -> float:
        """Predicted time of one collective of nbytes over group_size ranks on a tier."""
        alpha, beta = self.alpha_beta(collective, tier)
        return _formulas.predict_seconds(collective, nbytes, group_size, alpha, beta)
