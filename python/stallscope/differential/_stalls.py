"""The published definitions of the differential stall method, and the trace-based table's
figure for the same stall.

Definitions (DS-Analyzer, Mohan et al., VLDB 2021; Stash, Sharma et al., ICDCS 2023), T being
the mean step time of a run over its measured steps:

============  ======================================  ==========================
stall         differential                            share of the step time of
============  ======================================  ==========================
prep          T(cached) - T(synthetic)                cached
fetch         T(cold) - T(cached)                     cold
data          T(cold) - T(synthetic) (prep + fetch)   cold
interconnect  T(synthetic, G devices) - T(one)        synthetic (G in one node)
network       T(network@rate) - T(synthetic)          synthetic (the one-node time)
============  ======================================  ==========================

Per sample: the difference divided by the samples each rank processes per step (every run
has the same per-rank batch: the G-device runs are the 1-device job scaled out).

The trace's figure for a stall is the same difference taken over the trace's own categories:
for the data stalls the data wait (data_fetch + data_prep + data), for interconnect and
network the communication stall (sync_wait + network + interconnect) of the minuend run
minus that of the subtrahend run. The disagreement is trace minus differential. They differ by
what the trace cannot see (a loader's workers slowing compute down by sharing its cores) and
by what the differential cannot separate (noise between runs); and in a job of several ranks
by where a wait surfaces: while one rank waits for its batch the others wait for it at the
next collective, which their traces count as communication (sync wait; on CPU runs DDP's
buckets carry no arrival time, so as interconnect or network). For the data stalls the
change of the communication stall between the two runs is therefore given too
(``trace_comm_ns_per_step``): the data stall that surfaced as waits at the collectives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

from stallscope.exceptions import AnalyzeError

DATA_COLUMNS: Final = ("data_fetch_ns", "data_prep_ns", "data_ns")
COMM_COLUMNS: Final = ("sync_wait_ns", "network_ns", "interconnect_ns")


@dataclass(frozen=True)
class Definition:
    stall: str
    minuend: str
    subtrahend: str
    base: str  # the run whose step time the share is of
    trace: tuple[str, ...]  # the stall table's columns the trace's figure is made of


DEFINITIONS: Final = (
    Definition("prep", "cached", "synthetic", "cached", DATA_COLUMNS),
    Definition("fetch", "cold", "cached", "cold", DATA_COLUMNS),
    Definition("data", "cold", "synthetic", "cold", DATA_COLUMNS),
    Definition("interconnect", "synthetic", "one", "synthetic", COMM_COLUMNS),
)

STALLS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "stall": pl.String(),
    "rate": pl.String(),
    "minuend": pl.String(),
    "subtrahend": pl.String(),
    "ns_per_step": pl.Float64(),
    "ns_per_sample": pl.Float64(),
    "share_pct": pl.Float64(),
    "trace_ns_per_step": pl.Float64(),
    "trace_ns_per_sample": pl.Float64(),
    "trace_share_pct": pl.Float64(),
    "trace_comm_ns_per_step": pl.Float64(),
    "disagreement_ns_per_sample": pl.Float64(),
    "disagreement_pct_points": pl.Float64(),
}
"""differential_stalls' columns: the stall (rate: the network run's link rate, else null),
the two runs subtracted, the differential figure per step (ns), per sample (ns; null when the
runs recorded no batch sizes) and as a share of the base run's step time (%), the same three
for the trace, for the data stalls the change of the communication stall between the two runs
(ns per step; null for the others), and trace minus differential per sample (ns) and in
shares (percentage points)."""


def _row(
    runs: dict[str, dict[str, float | None]], d: Definition, rate: str | None
) -> dict[str, object]:
    a, b, base = runs[d.minuend], runs[d.subtrahend], runs[d.base]

    def trace_of(r: dict[str, float | None], cols: tuple[str, ...] = d.trace) -> float:
        return sum(float(r[c] or 0.0) for c in cols)

    step = float(base["step_ns"] or 0.0)
    samples = a["samples_per_step"]
    diff = float(a["step_ns"] or 0.0) - float(b["step_ns"] or 0.0)
    trace = trace_of(a) - trace_of(b)

    def per_sample(v: float) -> float | None:
        return v / samples if samples else None

    def share(v: float) -> float | None:
        return 100.0 * v / step if step > 0 else None

    ps, tps, sh, tsh = per_sample(diff), per_sample(trace), share(diff), share(trace)
    return {
        "stall": d.stall,
        "rate": rate,
        "minuend": d.minuend,
        "subtrahend": d.subtrahend,
        "ns_per_step": diff,
        "ns_per_sample": ps,
        "share_pct": sh,
        "trace_ns_per_step": trace,
        "trace_ns_per_sample": tps,
        "trace_share_pct": tsh,
        "trace_comm_ns_per_step": (
            trace_of(a, COMM_COLUMNS) - trace_of(b, COMM_COLUMNS)
            if d.trace == DATA_COLUMNS
            else None
        ),
        "disagreement_ns_per_sample": None if ps is None or tps is None else tps - ps,
        "disagreement_pct_points": None if sh is None or tsh is None else tsh - sh,
    }


def differential_stalls(runs: pl.DataFrame) -> pl.DataFrame:
    """The stalls (STALLS_SCHEMA, one row each) from the runs' summaries: a frame with a
    ``run`` column (one, synthetic, cached, cold, network@RATE) and run_summary's columns. A
    stall whose runs are missing is left out; network gets one row per network run."""
    if "run" not in runs.columns or "step_ns" not in runs.columns:
        raise AnalyzeError("the runs frame needs a run column and run_summary's columns")
    by = {str(r["run"]): r for r in runs.iter_rows(named=True)}
    rows = [_row(by, d, None) for d in DEFINITIONS if {d.minuend, d.subtrahend} <= by.keys()]
    for name in by:
        if name.startswith("network@") and "synthetic" in by:
            rate = name.removeprefix("network@")
            d = Definition("network", name, "synthetic", "synthetic", COMM_COLUMNS)
            rows.append(_row(by, d, rate))
    return (
        pl.DataFrame(rows, schema=STALLS_SCHEMA, orient="row")
        if rows
        else pl.DataFrame(schema=STALLS_SCHEMA)
    )
