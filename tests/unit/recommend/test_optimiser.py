"""The optimiser against brute force on random catalogs: the cheapest configuration within a
time budget, the fastest within a cost budget and the Pareto front are those an exhaustive
search over every instance type and count finds."""

from __future__ import annotations

import datetime
import math
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stallscope.recommend import Job, NoCandidateError, recommendation
from stallscope.recommend._answers import pareto_mask
from stallscope.recommend._catalog import CATALOG_SCHEMA
from stallscope.recommend._predictor_seam import Shape
from stallscope.recommend._recommend import MAX_RISK
from stallscope.recommend._spot import SpotModel, expected_hours, miss_probability
from tests.unit.recommend.conftest import FakePredictor

# Devices with an fp16 peak (the test predictor scales by it) and their memory.
_GPUS = [("T4", 16.0), ("V100-SXM2-32GB", 32.0), ("A100-SXM4-80GB", 80.0), ("H100-SXM", 80.0)]
_TODAY = datetime.date(2026, 11, 1)
_MODEL = SpotModel(interval_hours=0.5, restart_hours=0.1)


@st.composite
def catalogs(draw: st.DrawFn) -> pl.DataFrame:
    n = draw(st.integers(1, 6))
    rows = []
    for i in range(n):
        gpu, mem = draw(st.sampled_from(_GPUS))
        price = draw(st.floats(0.2, 100.0, allow_nan=False))
        spot = draw(st.one_of(st.none(), st.floats(0.05, 1.0).map(lambda f, p=price: f * p)))
        rows.append(
            {
                "cloud": draw(st.sampled_from(["aws", "gcp"])),
                "region": "r1",
                "instance": f"i{i}",
                "gpu": gpu,
                "gpus": draw(st.sampled_from([1, 2, 4, 8])),
                "gpu_memory_gb": mem,
                "vcpus": 8,
                "memory_gb": 64.0,
                "intra_node_GBps": draw(st.sampled_from([16.0, 32.0, 300.0, 450.0])),
                "network_gbps": draw(st.sampled_from([None, 10.0, 100.0, 400.0, 3200.0])),
                "price_per_hour": price,
                "spot_price_per_hour": spot,
                "source": "https://example.com/test",
                "date": _TODAY,
            }
        )
    return pl.DataFrame(rows, schema=CATALOG_SCHEMA, orient="row")


def _brute(
    cat: pl.DataFrame,
    max_instances: int,
    steps: int,
    job: Job,
    spot_rate: float | None,
    budget_hours: float | None,
) -> list[dict[str, Any]]:
    """Every (instance, count, market) with its hours, cost and risk, one at a time."""
    fake = FakePredictor()
    per_step = job.global_batch // job.batch_size if job.global_batch and job.batch_size else 2
    total = steps * per_step  # micro-batches: steps of the global batch (the measured 2 ranks')
    out = []
    for r in cat.iter_rows(named=True):
        for n in range(1, max_instances + 1):
            if n > 1 and r["network_gbps"] is None:
                continue
            ranks = n * r["gpus"]
            acc = 1
            if job.global_batch is not None:
                assert job.batch_size is not None
                acc, rest = divmod(job.global_batch, ranks * job.batch_size)
                if rest or acc < 1:
                    continue
            shape = Shape(r["gpu"], n, r["gpus"], r["intra_node_GBps"], r["network_gbps"], acc)
            step_ns = fake.one(shape)["step_ns"]
            assert isinstance(step_ns, float)
            k = max(1, math.ceil(total / (ranks * acc) - 1e-9))
            hours = k * step_ns / 3.6e12
            config = f"{r['instance']} x {n}"
            risk = None if budget_hours is None else float(hours > budget_hours)
            out.append(
                {
                    "config": config,
                    "market": "on-demand",
                    "hours": hours,
                    "cost": hours * (n * r["price_per_hour"]),
                    "risk": risk,
                }
            )
            if spot_rate is None or r["spot_price_per_hour"] is None:
                continue
            spot_hours = expected_hours(hours, n * spot_rate, _MODEL)
            out.append(
                {
                    "config": config,
                    "market": "spot",
                    "hours": spot_hours,
                    "cost": spot_hours * (n * r["spot_price_per_hour"]),
                    "risk": None
                    if budget_hours is None
                    else miss_probability(hours, n * spot_rate, _MODEL, budget_hours),
                }
            )
    return out


def _front(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {
        (a["config"], a["market"])
        for a in rows
        if not any(
            b["hours"] <= a["hours"]
            and b["cost"] <= a["cost"]
            and (b["hours"] < a["hours"] or b["cost"] < a["cost"])
            for b in rows
        )
    }


def _meets(row: dict[str, Any], by_time: bool, budget: float) -> bool:
    return bool(row["risk"] <= MAX_RISK) if by_time else bool(row["cost"] <= budget)


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(
    cat=catalogs(),
    max_instances=st.integers(1, 6),
    steps=st.integers(1, 2_000_000),
    pick=st.floats(0.0, 1.0),
    by_time=st.booleans(),
    global_batch=st.sampled_from([None, 64, 96, 256]),
    spot_rate=st.sampled_from([None, 0.0, 0.002, 0.05, 0.5]),
)
def test_answers_agree_with_brute_force(
    cat: pl.DataFrame,
    max_instances: int,
    steps: int,
    pick: float,
    by_time: bool,
    global_batch: int | None,
    spot_rate: float | None,
) -> None:
    job = Job(batch_size=8, global_batch=global_batch) if global_batch else Job()
    plain = _brute(cat, max_instances, steps, job, None, None)
    if not plain:
        return
    key = "hours" if by_time else "cost"
    values = sorted(r[key] for r in plain)
    budget = values[0] * 0.5 + pick * (values[-1] * 1.5 - values[0] * 0.5)
    brute = _brute(cat, max_instances, steps, job, spot_rate, budget if by_time else None)
    opts: dict[str, Any] = {"time_budget": budget} if by_time else {"cost_budget": budget}
    if spot_rate is not None:
        opts |= {"spot": True, "interruption_rate": spot_rate, "spot_model": _MODEL}
    feasible = [r for r in brute if _meets(r, by_time, budget)]
    run = dict(steps=steps, catalog=cat, max_instances=max_instances, job=job, **opts)
    if not feasible:
        with pytest.raises(NoCandidateError) as e:
            recommendation(FakePredictor(), **run)
        pool = [r for r in brute if r["market"] == "on-demand"] if by_time else brute
        closest = min(pool, key=lambda r: (r[key], r["cost" if by_time else "hours"]))
        assert e.value.needed is not None
        assert math.isclose(e.value.needed, closest[key], rel_tol=1e-12)
        return
    rec = recommendation(FakePredictor(), **run)
    # The optimiser computes in frames, the brute force one value at a time: equal to 1e-12.
    objective = "cost" if by_time else "hours"
    best = min(r[objective] for r in feasible)
    assert math.isclose(rec.best[objective], best, rel_tol=1e-12)
    winners = {
        (r["config"], r["market"])
        for r in feasible
        if math.isclose(r[objective], best, rel_tol=1e-12)
    }
    assert (rec.best["config"], rec.best["market"]) in winners
    assert set(rec.pareto.select("config", "market").iter_rows()) == _front(brute)
    assert rec.candidates.height == len(brute)


@settings(max_examples=200, deadline=None)
@given(
    points=st.lists(
        st.tuples(st.integers(0, 8).map(float), st.integers(0, 8).map(float)),
        min_size=0,
        max_size=40,
    )
)
def test_pareto_mask_agrees_with_brute_force_ties_included(
    points: list[tuple[float, float]],
) -> None:
    frame = pl.DataFrame(
        {"hours": [p[0] for p in points], "cost": [p[1] for p in points]},
        schema={"hours": pl.Float64, "cost": pl.Float64},
    )
    got = pareto_mask(frame).to_list()
    want = [
        not any((h2 <= h and c2 <= c and (h2 < h or c2 < c)) for h2, c2 in points)
        for h, c in points
    ]
    assert got == want
