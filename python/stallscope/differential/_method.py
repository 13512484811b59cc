"""The differential stall method end to end: run every configuration traced, summarise each
run from its trace, subtract, and put the trace-based figures beside the differences."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import polars as pl

import stallscope
from stallscope.analysis import STALL_COLUMNS
from stallscope.comm._neighbour import cpu_sample, neighbour_guard, others_during
from stallscope.differential._command import Entry
from stallscope.differential._configs import PARTS, RunConfig, plan
from stallscope.differential._launch import Launched, launch
from stallscope.differential._measure import TRIM, WARMUP, cache_marks, run_summary
from stallscope.differential._stalls import differential_stalls
from stallscope.exceptions import AnalyzeError, RunDirError

#: Side by side over alone above which the machine is taken as busy (on two free cores the
#: pair runs as fast as one alone).
GUARD_LIMIT: Final = 1.1
#: Cores other work may use while the runs run before their timings are called noisy.
OTHERS_LIMIT: Final = 0.1


@dataclass
class Settings:
    """How to run the method. steps: measured steps per run (warm-up comes on top); rates: the
    test bed's link rates, one network run each; cold: how the cold run empties the page cache
    (auto: drop it as root, else evict the declared files; drop-caches; fadvise); dataset:
    files or folders the script reads (besides what it declares itself); skip: parts left out
    (data, interconnect, network); timeout_s: per run; guard: time the noise guard before and
    after; warmup: steps left out at the start of each run; trim: the fraction of the
    measured steps left out at each end of the trimmed mean (run_summary)."""

    nodes: int = 2
    ranks_per_node: int = 1
    rates: tuple[str, ...] = ("1gbit",)
    steps: int = 20
    warmup: int = WARMUP
    trim: float = TRIM
    cold: str = "auto"
    dataset: tuple[Path, ...] = ()
    skip: tuple[str, ...] = ()
    timeout_s: float = 300.0
    guard: bool = True

    @property
    def devices(self) -> int:
        return self.nodes * self.ranks_per_node


@dataclass
class Result:
    """What the method found: per run its configuration and trace summary (``runs``: one row
    per run, run_summary's columns and the configuration's), the stalls (differential_stalls'
    frame), the page cache actions, the noise guard (``before`` / ``after``: two probe
    processes side by side over one alone; ``others_cores``: cores other work used while the
    runs ran), and notes (parts skipped and why, noise)."""

    settings: Settings
    entry: Entry
    runs: pl.DataFrame
    stalls: pl.DataFrame
    launched: list[Launched]
    cache: dict[str, dict[str, Any]] = field(default_factory=dict)
    guard: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _network_possible() -> str | None:
    """Why the test bed cannot run here (None: it can)."""
    from stallscope.testbed import TestbedError, require_privileges

    try:
        require_privileges()
    except TestbedError as e:
        return str(e)
    return None


def _cache_info(launched: Launched, events: pl.DataFrame) -> dict[str, Any] | None:
    """What was done to the page cache before a cached / cold run: by analyze itself and by
    the script's stallscope.data.dataset_files (rank 0's mark)."""
    if launched.config.cache is None:
        return None
    marks = cache_marks(events)
    by_script = marks.row(0, named=True) if marks.height else None
    a = launched.cache
    by_analyze = (
        None
        if a is None
        else {
            "method": a.method,
            "files": a.files,
            "bytes": a.bytes,
            "resident_before": a.resident_before,
            "resident_after": a.resident_after,
        }
    )
    methods = [str(m["method"]) for m in (by_analyze, by_script) if m is not None]
    return {
        "mode": launched.config.cache,
        "method": "+".join(dict.fromkeys(methods)) or "none",
        "by_analyze": by_analyze,
        "by_script": by_script,
    }


def analyze(
    entry: Entry,
    out: Path,
    settings: Settings,
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Run the method for `entry` (see the module docstring of _configs for the runs),
    traces under ``out/runs``, logs under ``out/logs``."""
    say = progress or (lambda _msg: None)
    skip = list(settings.skip)
    notes: list[str] = []
    if settings.nodes > 1 and "network" not in skip:
        why = _network_possible()
        if why is not None:
            skip.append("network")
            notes.append(f"network stall not measured: the test bed cannot run here ({why})")
    configs: Sequence[RunConfig] = plan(
        settings.nodes, settings.ranks_per_node, settings.rates, skip
    )
    if settings.devices == 1:
        notes.append("interconnect stall not measured: 1 device (give --ranks-per-node > 1)")
    elif settings.nodes == 1 and "network" not in settings.skip:
        notes.append("network stall not measured: 1 node (give --nodes > 1)")
    guard: dict[str, float] = {}
    if settings.guard:
        guard["before"] = neighbour_guard(repeats=1).ratio
    cpu_before = cpu_sample()
    budget = settings.warmup + settings.steps
    launched: list[Launched] = []
    rows: list[pl.DataFrame] = []
    cache: dict[str, dict[str, Any]] = {}
    for i, cfg in enumerate(configs):
        where = f"{cfg.nodes} nodes at {cfg.rate}" if cfg.testbed else "1 node"
        say(
            f"[{i + 1}/{len(configs)}] {cfg.name}: {cfg.ranks} rank(s), {where}, "
            f"{cfg.data} data{'' if cfg.cache is None else ', ' + cfg.cache}"
        )
        run = launch(
            cfg,
            entry.argv,
            out,
            steps=budget,
            timeout_s=settings.timeout_s,
            dataset=settings.dataset,
            cold=settings.cold,
        )
        launched.append(run)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the run's problems are reported by run_info
                events = stallscope.load(run.run_dir)
            summary = run_summary(events, settings.warmup, settings.trim)
        except RunDirError as e:
            raise AnalyzeError(
                f"run {cfg.name} left no usable trace in {run.run_dir} ({e}); does the program "
                "run Python and record steps (stallscope.data.synthetic(loader))?"
            ) from None
        except AnalyzeError as e:
            raise AnalyzeError(f"run {cfg.name} ({run.run_dir}): {e}") from None
        info = _cache_info(run, events)
        if info is not None:
            cache[cfg.name] = info
        rows.append(
            summary.with_columns(
                pl.lit(cfg.name).alias("run"),
                pl.lit(cfg.nodes).alias("nodes"),
                pl.lit(cfg.data).alias("data"),
                pl.lit(cfg.cache, pl.String).alias("cache"),
                pl.lit(cfg.rate, pl.String).alias("rate"),
                pl.lit(run.wall_s).alias("wall_s"),
                pl.lit(str(run.run_dir)).alias("run_dir"),
            )
        )
    cpu_after = cpu_sample()
    if cpu_before is not None and cpu_after is not None:
        others = others_during(cpu_before, cpu_after, OTHERS_LIMIT)
        guard["others_cores"] = others.others_cores + others.steal_cores
        if not others.ok:
            notes.append(
                f"other work used {guard['others_cores']:.2f} cores of this machine while the "
                f"runs ran (limit {OTHERS_LIMIT}): timings are noisy"
            )
    if settings.guard:
        guard["after"] = neighbour_guard(repeats=1).ratio
        worst = max(guard["before"], guard["after"])
        if worst > GUARD_LIMIT:
            notes.append(
                f"the machine was busy: two probe processes ran {worst:.2f}x slower side by "
                f"side than one alone (limit {GUARD_LIMIT}x): timings are noisy"
            )
    first = [
        "run",
        "ranks",
        "nodes",
        "data",
        "cache",
        "rate",
        "steps",
        "step_ns",
        "step_cv",
        "samples_per_step",
    ]
    runs = pl.concat(rows).select(*first, *STALL_COLUMNS, "wall_s", "run_dir")
    stalls = differential_stalls(runs)
    if runs["samples_per_step"].null_count():
        notes.append(
            "some runs recorded no batch sizes (stallscope.data.synthetic records them): "
            "per-sample figures are missing for them"
        )
    for name, info in cache.items():
        if info["method"] == "none" and name == "cold":
            notes.append(
                "the cold run could not empty the page cache: declare the dataset's files "
                "(stallscope.data.dataset_files, STALLSCOPE_DATASET or --dataset) or run as root"
            )
    return Result(settings, entry, runs, stalls, launched, cache, guard, notes)


def result_json(result: Result) -> dict[str, Any]:
    """The JSON document of a result: ``{"runs": [...], "stalls": {stall: {...}}, "trace":
    {stall: {...}}, "disagreement": {stall: {...}}, ...}``; times in ns, shares in % of the
    step time. A network stall per rate is under ``network@RATE``; ``network`` is the first
    rate's."""
    s = result.settings
    runs = []
    for r in result.runs.iter_rows(named=True):
        runs.append(
            {
                **{k: r[k] for k in ("run", "ranks", "nodes", "data", "cache", "rate", "steps")},
                "step_ns": r["step_ns"],
                "step_cv": r["step_cv"],
                "samples_per_step": r["samples_per_step"],
                "wall_s": r["wall_s"],
                "run_dir": r["run_dir"],
                "trace": {c.removesuffix("_ns") + "_ns": r[c] for c in STALL_COLUMNS},
                "page_cache": result.cache.get(r["run"]),
            }
        )
    stalls: dict[str, Any] = {}
    trace: dict[str, Any] = {}
    disagreement: dict[str, Any] = {}
    for r in result.stalls.iter_rows(named=True):
        keys = [r["stall"]] if r["rate"] is None else [f"network@{r['rate']}"]
        if r["rate"] is not None and "network" not in stalls:
            keys.append("network")
        for k in keys:
            stalls[k] = {
                "ns_per_sample": r["ns_per_sample"],
                "share_pct": r["share_pct"],
                "ns_per_step": r["ns_per_step"],
                "runs": [r["minuend"], r["subtrahend"]],
            }
            trace[k] = {
                "ns_per_sample": r["trace_ns_per_sample"],
                "share_pct": r["trace_share_pct"],
                "ns_per_step": r["trace_ns_per_step"],
            }
            if r["trace_comm_ns_per_step"] is not None:
                trace[k]["comm_ns_per_step"] = r["trace_comm_ns_per_step"]
            disagreement[k] = {
                "ns_per_sample": r["disagreement_ns_per_sample"],
                "pct_points": r["disagreement_pct_points"],
            }
    return {
        "command": list(result.entry.argv),
        "settings": {
            "nodes": s.nodes,
            "ranks_per_node": s.ranks_per_node,
            "devices": s.devices,
            "rates": list(s.rates),
            "steps": s.steps,
            "warmup": s.warmup,
            "trim": s.trim,
            "cold": s.cold,
            "skip": list(s.skip),
        },
        "runs": runs,
        "stalls": stalls,
        "trace": trace,
        "disagreement": disagreement,
        "noise_guard": result.guard,
        "notes": result.notes,
        "parts": list(PARTS),
    }
