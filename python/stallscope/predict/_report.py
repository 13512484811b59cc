"""A prediction for people and scripts: the table `stallscope predict` prints (frames in,
frames out) and its JSON document."""

from __future__ import annotations

from typing import Any

import polars as pl

from stallscope.analysis import STALL_COLUMNS
from stallscope.predict._predict import Prediction
from stallscope.predict._profile import Profile

MS = 1e6  # ns per ms


def measured_row(prof: Profile) -> dict[str, Any]:
    """The measured run as a row of the prediction's columns."""
    m = prof.measured
    return {
        "nodes": m.nodes,
        "ranks_per_node": m.ranks_per_node,
        "ranks": m.ranks,
        "rate_bps": m.link_rate_bps,
        "device": m.device,
        "backend": m.backend,
        "step_ns": m.step_ns,
        "step_spread_ns": prof.noise * (m.step_median_ns or m.step_ns),
        **{c: float(m.stalls_ns.get(c, 0.0)) for c in STALL_COLUMNS},
    }


def as_json(prof: Profile, pred: Prediction) -> dict[str, Any]:
    """{"measured": {...}, "predictions": [{nodes, ranks_per_node, rate_bps, step_ns, <stall
    column>_ns, ...}], "links": [...], "warnings": [...], "notes": [...]} (ns)."""
    return {
        "measured": measured_row(prof),
        "predictions": pred.frame.to_dicts(),
        "links": pred.links,
        "warnings": pred.warnings,
        "notes": prof.notes,
        "profile_source": prof.source,
    }


def _rate(bps: float | None) -> str:
    if bps is None:
        return "as calibrated"
    if bps >= 1e9:
        return f"{bps / 1e9:g} Gbit/s"
    return f"{bps / 1e6:g} Mbit/s"


def display_table(prof: Profile, pred: Prediction) -> pl.DataFrame:
    """One row for the measured run, then one per configuration: configuration, step ms, its
    spread (the measured run's noise, carried in proportion), speed-up (samples per second over the measured run's), and per stall column above 50 us
    in some row its ms and its share of the step (%)."""
    measured = measured_row(prof)
    rows = [measured, *pred.frame.to_dicts()]
    cols = [c for c in STALL_COLUMNS if any(abs(float(r[c])) >= 0.05 * MS for r in rows)]
    out: list[dict[str, Any]] = []
    for i, r in enumerate(rows):
        what = f"{r['nodes']} x {r['ranks_per_node']}"
        if i == 0:
            config = f"measured: {what}"
            speedup = 1.0
        else:
            config = f"{what}, {r.get('network') or _rate(r['rate_bps'])}"
            if r.get("strategy", "ddp") != "ddp":
                config += f", {r['strategy']}"
            if r.get("accumulation", 1) != 1:
                config += f", {r['accumulation']} micro-batches"
            if r["device"] != prof.measured.device:
                config += f", {r['device']}"
            speedup = r["speedup"]
        row: dict[str, Any] = {
            "configuration": config,
            "step_ms": r["step_ns"] / MS,
            "spread_ms": float(r.get("step_spread_ns") or 0.0) / MS,
            "speedup": speedup,
        }
        step = float(r["step_ns"]) or 1.0
        for c in cols:
            row[f"{c.removesuffix('_ns')}_ms"] = float(r[c]) / MS
            row[f"{c.removesuffix('_ns')}_pct"] = 100.0 * float(r[c]) / step
        out.append(row)
    return pl.DataFrame(out)
