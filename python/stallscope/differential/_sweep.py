"""The communication stall of a family of models, measured on the test bed: per model, one run
on 1 device, one of G devices in one node and one over N emulated nodes per link rate
(synthetic data in all), the stall being T(G over N nodes) - T(1 device) (Stash's interconnect
and network stalls together). Beside it, per row: the trace's communication stall; the
predictor's view (stallscope.predict: the profile of the one-node run, predicted on 1 device
and on the N nodes at the rate); and the bucketed-overlap formula (_overlap), from the backward
pass's compute time on 1 device and the DDP buckets of the network run."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import polars as pl

import stallscope
from stallscope.analysis import assign_steps
from stallscope.differential._configs import RunConfig, network_name
from stallscope.differential._launch import launch
from stallscope.differential._measure import TRIM, WARMUP, measured_steps, run_summary
from stallscope.differential._overlap import exposed_comm_ns
from stallscope.differential._stalls import COMM_COLUMNS
from stallscope.exceptions import AnalyzeError, StallscopeWarning

#: The compute region whose time the gradients are computed over (the workloads' backward).
BACKWARD: Final = "backward"


@dataclass(frozen=True)
class ModelPoint:
    """One model of the family: its per-rank command, and its size in the model's terms."""

    name: str
    argv: tuple[str, ...]
    layers: int
    gradient_bytes: int


def _load(run_dir: Path) -> pl.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a run's own problems do not stop the sweep
        return stallscope.load(run_dir)


def _measured(events: pl.DataFrame, warmup: int) -> pl.DataFrame:
    """rank 0's events of its measured steps (measured_steps' rule), with a step column."""
    table = stallscope.stall_table(events)
    steps = measured_steps(table, warmup).filter(pl.col("rank") == 0)["step"]
    ev = assign_steps(events.filter(pl.col("rank") == 0)).collect()
    return ev.filter(pl.col("step").is_in(steps.implode()))


def backward_ns(events: pl.DataFrame, warmup: int = WARMUP) -> float:
    """Mean time of the ``backward`` compute region over rank 0's measured steps (ns)."""
    ev = _measured(events, warmup).filter(
        (pl.col("kind") == "region") & (pl.col("name") == BACKWARD)
    )
    if ev.height == 0:
        raise AnalyzeError(
            f"the run has no '{BACKWARD}' region in its measured steps: the bucketed overlap "
            "needs the backward pass timed (stallscope.region('backward', 'compute'))"
        )
    return float((ev["end_ns"] - ev["start_ns"]).mean())  # type: ignore[arg-type]


def bucket_sizes(events: pl.DataFrame, warmup: int = WARMUP) -> list[int]:
    """The DDP bucket sizes (bytes) of rank 0's last measured step, in launch order."""
    ev = _measured(events, warmup).filter(pl.col("kind") == "bucket")
    if ev.height == 0:
        return []
    last = ev.filter(pl.col("step") == ev["step"].max()).sort("start_ns")
    return [int(b) for b in last["bytes"]]


def sweep_comm(
    points: Sequence[ModelPoint],
    out: Path,
    *,
    rates: Sequence[str],
    nodes: int = 2,
    ranks_per_node: int = 1,
    steps: int = 10,
    warmup: int = WARMUP,
    trim: float = TRIM,
    timeout_s: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> pl.DataFrame:
    """One row per model point and rate: point, layers, gradient_bytes, rate, rate_bps,
    step_one_ns, step_pair_ns (G devices in one node), step_network_ns, comm_stall_ns
    (network minus one), trace_comm_ns (the network run's communication stall in the trace),
    predicted_step_ns and predicted_ns (the predictor's step on the N nodes, and that minus its
    step on 1 device, from the profile of the one-node run), predictor_notes (its warnings),
    backward_ns (1 device), buckets (bytes, launch order), formula_ns (exposed_comm_ns of the
    bucketed overlap)."""
    from stallscope.testbed import parse_rate

    say = progress or (lambda _m: None)
    g = nodes * ranks_per_node
    rows = []
    for p in points:
        where = out / p.name
        say(f"{p.name}: 1 device")
        one = launch(RunConfig("one", 1, 1, "synthetic"), p.argv, where, steps=warmup + steps,
                     timeout_s=timeout_s)  # fmt: skip
        one_ev = _load(one.run_dir)
        one_sum = run_summary(one_ev, warmup, trim).row(0, named=True)
        bwd = backward_ns(one_ev, warmup)
        say(f"{p.name}: {g} ranks in one node")
        pair = launch(RunConfig("synthetic", g, 1, "synthetic"), p.argv, where,
                      steps=warmup + steps, timeout_s=timeout_s)  # fmt: skip
        pair_sum = run_summary(_load(pair.run_dir), warmup, trim).row(0, named=True)
        views = _predicted(pair.run_dir, nodes, ranks_per_node, [parse_rate(r) for r in rates])
        for rate, (pred_step, pred_stall, notes) in zip(rates, views, strict=True):
            say(f"{p.name}: {g} ranks over {nodes} nodes at {rate}")
            cfg = RunConfig(network_name(rate), g, nodes, "synthetic", rate=rate)
            net = launch(cfg, p.argv, where, steps=warmup + steps, timeout_s=timeout_s)
            net_ev = _load(net.run_dir)
            s = run_summary(net_ev, warmup, trim).row(0, named=True)
            buckets = bucket_sizes(net_ev, warmup)
            bps = parse_rate(rate)
            rows.append(
                {
                    "point": p.name,
                    "layers": p.layers,
                    "gradient_bytes": p.gradient_bytes,
                    "rate": rate,
                    "rate_bps": bps,
                    "step_one_ns": one_sum["step_ns"],
                    "step_pair_ns": pair_sum["step_ns"],
                    "step_network_ns": s["step_ns"],
                    "comm_stall_ns": s["step_ns"] - one_sum["step_ns"],
                    "trace_comm_ns": sum(s[c] for c in COMM_COLUMNS),
                    "predicted_step_ns": pred_step,
                    "predicted_ns": pred_stall,
                    "predictor_notes": notes,
                    "backward_ns": bwd,
                    "buckets": buckets,
                    "formula_ns": exposed_comm_ns(
                        bwd, buckets, nodes=nodes, ranks_per_node=ranks_per_node, rate_bps=bps
                    ),
                }
            )
    return pl.DataFrame(
        rows,
        schema_overrides={"buckets": pl.List(pl.Int64), "predictor_notes": pl.List(pl.String)},
    )


def _predicted(
    run_dir: Path, nodes: int, ranks_per_node: int, rates_bps: Sequence[float]
) -> list[tuple[float, float, list[str]]]:
    """Per rate: the predictor's step (ns) on nodes x ranks_per_node at the rate, that step
    minus its step on 1 device, and the warnings it gave, from the profile of `run_dir`."""
    import stallscope.predict as sp

    targets = [sp.Target(1, 1)] + [sp.Target(nodes, ranks_per_node, rate_bps=r) for r in rates_bps]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # kept as notes, never raised
        try:
            frame = sp.predict(sp.profile_of(run_dir), targets)
        except sp.PredictError as e:
            raise AnalyzeError(f"the predictor cannot use {run_dir}: {e}") from None
    notes = sorted({str(w.message) for w in caught if issubclass(w.category, StallscopeWarning)})
    steps = [float(v) for v in frame["step_ns"]]
    return [(s, s - steps[0], notes) for s in steps[1:]]
