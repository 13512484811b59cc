"""recommend / recommendation: a measured job, an amount of work and a budget -> every cloud
configuration's predicted time and cost, the best one under the budget, why it wins, and the
Pareto front of time against cost."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import polars as pl

from stallscope.recommend import _answers, _budgets
from stallscope.recommend._candidates import Excluded, homogeneous
from stallscope.recommend._catalog import filter_catalog, load_catalog
from stallscope.recommend._errors import NoCandidateError, RecommendError
from stallscope.recommend._evaluate import evaluate
from stallscope.recommend._explain import cost_text, describe, hours_text, why
from stallscope.recommend._interruptions import load_spot_interruptions
from stallscope.recommend._job import UNITS, Job, Work, micro_batches
from stallscope.recommend._market import on_demand, spot_rows, with_risk
from stallscope.recommend._mix import mixes
from stallscope.recommend._predictor_seam import StepPredictor
from stallscope.recommend._spot import SpotModel
from stallscope.recommend._spot_rates import SpotRates

MAX_INSTANCES: Final = 16  # default: instances of one type in a configuration
MAX_RISK: Final = 0.1  # default: a spot configuration may miss the time budget 1 time in 10

#: The columns of Recommendation.pareto (and of the report's Pareto section).
PARETO_COLUMNS: Final = (
    "config",
    "market",
    "cloud",
    "region",
    "ranks",
    "hours",
    "cost",
    "step_ns",
    "risk",
    "meets",
    "mix",
    "layout",
)


@dataclass
class Recommendation:
    """What `recommendation` returns.

    best: the winning configuration's row. why: the reason, in words. candidates: every
    configuration predicted, one row per configuration and market, best first (those meeting
    the budget first). pareto: the configurations on the Pareto front of hours against cost
    (PARETO_COLUMNS), fastest first. excluded: what was left out and why. notes: what the
    figures rest on. time_budget_hours / cost_budget: the budget asked for."""

    best: dict[str, Any]
    why: str
    objective: str
    candidates: pl.DataFrame
    pareto: pl.DataFrame
    excluded: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    time_budget_hours: float | None = None
    cost_budget: float | None = None


def _work(
    steps: float | None, samples: float | None, tokens: float | None, epochs: float | None
) -> Work:
    given = {
        u: v for u, v in zip(UNITS, (steps, samples, tokens, epochs), strict=True) if v is not None
    }
    if len(given) != 1:
        raise RecommendError(
            "give the amount of work as exactly one of steps, samples, tokens or epochs "
            f"(--steps N, --samples N, --tokens N, --epochs N); got {len(given)}"
        )
    ((unit, amount),) = given.items()
    return Work(unit, float(amount))


def _catalog(
    catalog: str | Path | pl.DataFrame | None,
    prices: str | Path | None,
    gpus: Sequence[str] | None,
    clouds: Sequence[str] | None,
    region: str | None,
) -> pl.DataFrame:
    table = catalog if isinstance(catalog, pl.DataFrame) else load_catalog(catalog, prices)
    rows = filter_catalog(table, gpus, clouds, region)
    if rows.height == 0:
        asked = ", ".join(
            f"{k} {v}" for k, v in (("GPUs", gpus), ("clouds", clouds), ("region", region)) if v
        )
        raise RecommendError(
            f"no instance in the catalog matches {asked or 'the selection'}; its clouds: "
            f"{', '.join(sorted(set(table['cloud'])))}; its regions: "
            f"{', '.join(sorted(set(table['region'])))}"
        )
    return rows


def recommendation(
    run: object,
    *,
    steps: float | None = None,
    samples: float | None = None,
    tokens: float | None = None,
    epochs: float | None = None,
    time_budget: str | float | None = None,
    cost_budget: str | float | None = None,
    job: Job | None = None,
    catalog: str | Path | pl.DataFrame | None = None,
    prices: str | Path | None = None,
    gpus: Sequence[str] | None = None,
    clouds: Sequence[str] | None = None,
    region: str | None = None,
    spot: bool = False,
    spot_model: SpotModel | None = None,
    interruptions: str | Path | pl.DataFrame | None = None,
    interruption_rate: float | None = None,
    max_risk: float = MAX_RISK,
    mix: bool = False,
    max_instances: int = MAX_INSTANCES,
    measured_device: str | None = None,
    precision: str = "fp32",
    compute_scales: Mapping[str, float] | None = None,
) -> Recommendation:
    """The best configuration for the measured job ``run`` under one budget: the cheapest that
    finishes within ``time_budget`` (hours, or "24h", "90m", "2d") or the fastest that costs at
    most ``cost_budget`` (dollars). ``run``: a run directory, Kineto traces, a saved profile, a
    `stallscope.predict.Profile`, or a StepPredictor. ``measured_device``: for a run on CPU
    threads, the GPU its compute stands for; ``precision``: the one whose matmul rates scale it;
    ``compute_scales``: per GPU, a measured ratio of compute time on it to the run's (for a
    GPU the device table cannot scale to). The other options: docs/recommend.md."""
    work = _work(steps, samples, tokens, epochs)
    if (time_budget is None) == (cost_budget is None):
        raise RecommendError(
            "give exactly one budget: a time budget (--time-budget 24h: the cheapest "
            "configuration that finishes in time) or a cost budget (--cost-budget 5000: the "
            "fastest within it)"
        )
    by_time = time_budget is not None
    budget = _budgets.hours(time_budget) if time_budget is not None else None
    money = _budgets.dollars(cost_budget) if cost_budget is not None else None
    if not (0 <= max_risk < 1):
        raise RecommendError(f"max_risk is a probability in [0, 1), got {max_risk}")
    if isinstance(max_instances, bool) or not 1 <= max_instances <= 4096:
        raise RecommendError(f"max_instances must be 1..4096, got {max_instances}")
    job = _job_for(run, job)
    if mix and getattr(run, "checks_memory", False):
        raise RecommendError(
            "mixes of two instance types need a measured run: the planner plans one GPU type "
            "per job (leave out --mix)"
        )
    model = spot_model or SpotModel()
    if not isinstance(run, StepPredictor):
        from stallscope.recommend._profile_predictor import predictor_for

        run = predictor_for(run, measured_device, precision, compute_scales)
    total = micro_batches(work, job, run.measured_ranks)
    table = _catalog(catalog, prices, gpus, clouds, region)
    excluded = Excluded()

    configs = homogeneous(table, job, max_instances, excluded)
    single = evaluate(configs, run, total, excluded)
    if single.height == 0:
        raise RecommendError(
            "no configuration could be predicted; why each was left out:\n  "
            + "\n  ".join(
                f"{r['instance']} x {r['counts']}: {r['reason']}"
                for r in excluded.frame().iter_rows(named=True)
            )
        )
    markets = [on_demand(single)]
    rates = None
    if spot:
        rates = SpotRates(_interruptions(interruptions), interruption_rate)
        markets.append(spot_rows(single, rates, model, excluded))
    frame = pl.concat(markets, how="vertical")

    mixed_note = None
    if mix:
        front = frame.filter(_answers.pareto_mask(frame))
        types = table.filter(pl.col("instance").is_in(front["instance"].unique().to_list()))
        evaluated = evaluate(mixes(types, run, job, max_instances), run, total, excluded)
        parts = [on_demand(evaluated)]
        if rates is not None:
            parts.append(spot_rows(evaluated, rates, model, excluded))
        mixed = pl.concat(parts, how="vertical")
        kept = _undominated(mixed, frame)
        mixed_note = (
            f"mixes: {mixed.height} of two instance types among "
            f"{', '.join(sorted(types['instance']))} predicted, {kept.height} shown (the rest "
            "are slower and dearer than one type alone)"
        )
        frame = pl.concat([frame, kept], how="vertical")

    frame = with_risk(frame, model, budget)
    meets = (pl.col("risk") <= max_risk) if by_time else (pl.col("cost") <= money)
    frame = frame.with_columns(meets=meets.fill_null(False))
    frame = frame.with_columns(pareto=_answers.pareto_mask(frame))
    frame = _answers.objective_order(frame, by_time)

    budget_text = hours_text(budget) if budget is not None else cost_text(money or 0.0)
    if not frame["meets"].any():
        raise _no_candidate(frame, work, by_time, budget_text, model, max_risk)
    best = frame.row(0, named=True)
    objective = (
        f"the cheapest configuration that finishes {work.describe()} within {budget_text}"
        if by_time
        else f"the fastest configuration that finishes {work.describe()} for at most {budget_text}"
    )
    notes = _notes(work, job, run, table, max_instances, spot, model, rates, max_risk, by_time)
    if mixed_note:
        notes.append(mixed_note)
    notes.extend(f"predictor: {n}" for n in run.predictor_notes)
    return Recommendation(
        best=best,
        why=why(best, frame, by_time, budget_text),
        objective=objective,
        candidates=frame,
        pareto=frame.filter("pareto").sort("hours", "cost").select(PARETO_COLUMNS),
        excluded=excluded.frame(),
        notes=notes,
        time_budget_hours=budget,
        cost_budget=money,
    )


def _job_for(run: object, job: Job | None) -> Job:
    """The job's batch facts: a planned model's own (``PlanPredictor.job``: its global batch of
    sequences), which a given Job may repeat but not contradict; else the given or none."""
    planned: Job | None = getattr(run, "job", None)  # PlanPredictor's; a run or profile has none
    if planned is None:
        return job or Job()
    if job is not None and job not in (Job(), planned):
        given = {k: v for k, v in vars(job).items() if v is not None}
        raise RecommendError(
            f"a planned model's job is its global batch of {planned.global_batch} sequences of "
            f"{planned.seq_len} tokens (the planner chooses the micro-batch and checks memory); "
            f"drop {', '.join(sorted(given))} or set the global batch on the model's predictor"
        )
    return planned


def recommend(run: object, **options: Any) -> pl.DataFrame:
    """`recommendation(run, **options).candidates`: every configuration, best first."""
    return recommendation(run, **options).candidates


def _interruptions(given: str | Path | pl.DataFrame | None) -> pl.DataFrame:
    return given if isinstance(given, pl.DataFrame) else load_spot_interruptions(given)


def _undominated(mixed: pl.DataFrame, single: pl.DataFrame) -> pl.DataFrame:
    """The mixes no single-type configuration of the same market matches in both time and
    cost."""
    if mixed.height == 0:
        return mixed
    best = single.select("market", "hours", "cost")
    keep = []
    for market, hours, cost in mixed.select("market", "hours", "cost").iter_rows():
        rival = best.filter(
            (pl.col("market") == market) & (pl.col("hours") <= hours) & (pl.col("cost") <= cost)
        )
        keep.append(rival.height == 0)
    return mixed.filter(pl.Series(keep, dtype=pl.Boolean))


def _no_candidate(
    frame: pl.DataFrame,
    work: Work,
    by_time: bool,
    budget_text: str,
    model: SpotModel,
    max_risk: float,
) -> NoCandidateError:
    if by_time:
        closest = _answers.fastest(
            frame.filter(pl.col("market") == "on-demand")
        ) or _answers.fastest(frame)
        assert closest is not None
        needed = closest["hours"]
        message = (
            f"no configuration finishes {work.describe()} within {budget_text}: the fastest, "
            f"{describe(closest)}, takes {hours_text(needed)} for {cost_text(closest['cost'])}. "
            f"A time budget of {hours_text(_round_up(needed))} would work (or less "
            "work, or more instances: --max-instances)"
        )
    else:
        closest = _answers.cheapest(frame)
        assert closest is not None
        needed = closest["cost"]
        message = (
            f"no configuration finishes {work.describe()} for {budget_text}: the cheapest, "
            f"{describe(closest)}, costs {cost_text(needed)} and takes "
            f"{hours_text(closest['hours'])}. A cost budget of {cost_text(_round_up(needed))} "
            "would work (or less work)"
        )
    return NoCandidateError(message, closest, needed, frame)


def _round_up(x: float) -> float:
    """``x`` rounded up at its third significant digit (a budget that works, shown short)."""
    if x <= 0:
        return x
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    return math.ceil(x / step - 1e-9) * step


def _notes(
    work: Work,
    job: Job,
    run: StepPredictor,
    table: pl.DataFrame,
    max_instances: int,
    spot: bool,
    model: SpotModel,
    rates: SpotRates | None,
    max_risk: float,
    by_time: bool,
) -> list[str]:
    notes = [f"compute: {run.basis}"]
    planned = getattr(run, "checks_memory", False)
    if planned:
        notes.append(
            f"every configuration trains global batches of {job.global_batch} sequences of "
            f"{job.seq_len:,} tokens; the layout column is the planner's choice for it"
        )
    elif job.global_batch is None:
        notes.append(
            "each rank keeps its measured batch, so the global batch grows with the ranks; "
            f"{work.describe()} count steps of the measured run's global batch "
            f"({run.measured_ranks} rank(s) x its batch) where the unit is steps. Give the "
            "global batch to keep (--global-batch) to hold it on every configuration"
        )
    else:
        notes.append(
            f"every configuration keeps the global batch of {job.global_batch} samples: ranks "
            f"x {job.batch_size} x gradient accumulation"
        )
    if job.memory_gb is None and not planned:
        notes.append(
            "the job's GPU memory is not checked: give --memory-gb to leave out GPUs too small"
        )
    notes.append(f"1 to {max_instances} instances of one type (--max-instances)")
    first, last = table["date"].min(), table["date"].max()
    notes.append(f"prices from the catalog, dated {first!s} to {last!s}; each row names its source")
    if spot:
        notes.append(
            f"spot: a checkpoint every {hours_text(model.interval_hours)} of work, "
            f"{hours_text(model.restart_hours)} per restart, interruptions of a Poisson process "
            "per instance; the expected time and cost are shown"
            + (
                f", and a spot configuration meets the time budget when it finishes within it "
                f"with probability {1 - max_risk:.0%} or more (--max-risk {max_risk:g})"
                if by_time
                else ""
            )
        )
        notes.extend(rates.notes() if rates is not None else [])
    return notes
