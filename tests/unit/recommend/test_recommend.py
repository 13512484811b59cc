"""recommendation() end to end on the test predictor: the answer and why, budgets nothing
meets, bad input, the job's limits, spot and mixes."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from stallscope.exceptions import CatalogError
from stallscope.recommend import (
    PARETO_COLUMNS,
    Job,
    NoCandidateError,
    RecommendError,
    load_catalog,
    load_spot_interruptions,
    recommend,
    recommendation,
)
from stallscope.recommend._catalog import CATALOG_SCHEMA
from stallscope.recommend._explain import short
from tests.unit.recommend.conftest import FakePredictor

_DAY = datetime.date(2026, 11, 1)


@pytest.fixture(scope="module")
def shipped() -> pl.DataFrame:
    return load_catalog(today=datetime.date(2025, 6, 1))


def _row(instance: str, gpu: str, mem: float, gpus: int, price: float, **kw: Any) -> dict[str, Any]:
    return {
        "cloud": kw.get("cloud", "aws"),
        "region": kw.get("region", "us-east-1"),
        "instance": instance,
        "gpu": gpu,
        "gpus": gpus,
        "gpu_memory_gb": mem,
        "vcpus": 8,
        "memory_gb": 64.0,
        "intra_node_GBps": kw.get("intra", 300.0),
        "network_gbps": kw.get("network", 100.0),
        "price_per_hour": price,
        "spot_price_per_hour": kw.get("spot"),
        "source": "https://example.com/test",
        "date": _DAY,
    }


def _catalog(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=CATALOG_SCHEMA, orient="row")


def test_cheapest_within_a_time_budget_with_its_reason(shipped: pl.DataFrame) -> None:
    rec = recommendation(FakePredictor(), steps=2_000_000, time_budget="24h", catalog=shipped)
    best = rec.best
    assert best["hours"] <= 24 and best["meets"]
    within = rec.candidates.filter(pl.col("meets"))
    assert best["cost"] == within["cost"].min()
    assert rec.candidates.row(0, named=True)["config"] == best["config"]  # best first
    assert rec.why.startswith(f"{best['config']} ({best['cloud']} {best['region']}, on-demand)")
    assert f"the cheapest of {within.height} configuration(s) that finish within 24 h" in rec.why
    assert rec.objective.startswith("the cheapest configuration that finishes 2,000,000 steps")
    assert rec.pareto.columns == list(PARETO_COLUMNS)
    assert rec.pareto["hours"].is_sorted() and rec.pareto["cost"].is_sorted(descending=True)
    frame = recommend(FakePredictor(), steps=2_000_000, time_budget=24.0, catalog=shipped)
    assert frame.equals(rec.candidates)
    import stallscope

    called = stallscope.recommend(  # type: ignore[operator]  # the package is callable
        FakePredictor(), steps=2_000_000, time_budget=24.0, catalog=shipped
    )
    assert called.equals(frame)


def test_fastest_within_a_cost_budget(shipped: pl.DataFrame) -> None:
    rec = recommendation(FakePredictor(), steps=2_000_000, cost_budget="$3,000", catalog=shipped)
    within = rec.candidates.filter(pl.col("cost") <= 3000)
    assert rec.best["hours"] == within["hours"].min()
    assert "the fastest of" in rec.why and "cost at most $3,000" in rec.why


def test_the_winner_is_explained_by_the_stall_it_avoids() -> None:
    # Same GPUs and price; one network is 40x faster: 4 instances are needed for the budget.
    cat = _catalog(
        _row("fast.8x", "H100", 80, 8, 50.0, network=3200.0),
        _row("slow.8x", "H100", 80, 8, 45.0, network=80.0),
    )
    rec = recommendation(FakePredictor(), steps=4_000_000, time_budget="3h", catalog=cat)
    assert rec.best["instance"] == "fast.8x"
    m = re.search(
        r"fast\.8x x \d+: network stall (\d+) % of its step against (\d+) % on slow\.8x x \d+ "
        r"\(on-demand: [\d.]+ h, \$[\d,]+, which misses the budget\)",
        rec.why,
    )
    assert m, rec.why
    assert int(m.group(1)) < int(m.group(2))


def test_no_configuration_within_the_time_budget_names_the_closest(shipped: pl.DataFrame) -> None:
    with pytest.raises(NoCandidateError) as e:
        recommendation(FakePredictor(), steps=50_000_000, time_budget="1h", catalog=shipped)
    err = e.value
    assert err.closest is not None and err.needed is not None
    assert err.needed == err.closest["hours"] > 1
    msg = str(err)
    assert "no configuration finishes 50,000,000 steps within 1 h: the fastest, " in msg
    assert err.closest["config"] in msg and "would work" in msg
    budget = float(re.search(r"A time budget of ([\d.]+) (h|days)", msg).group(1))  # type: ignore[union-attr]
    unit = 24 if "days" in msg.split("A time budget of")[1][:20] else 1
    rec = recommendation(
        FakePredictor(), steps=50_000_000, time_budget=budget * unit, catalog=shipped
    )
    assert rec.best["config"] == err.closest["config"]  # the budget it names works


def test_no_configuration_within_the_cost_budget_names_the_closest(shipped: pl.DataFrame) -> None:
    with pytest.raises(NoCandidateError) as e:
        recommendation(FakePredictor(), steps=2_000_000, cost_budget=1, catalog=shipped)
    err = e.value
    assert err.closest is not None and err.needed == err.closest["cost"] > 1
    assert "the cheapest, " in str(err) and "A cost budget of $" in str(err)
    assert isinstance(err.candidates, pl.DataFrame) and err.candidates.height > 0
    rec = recommendation(
        FakePredictor(), steps=2_000_000, cost_budget=err.needed * 1.001, catalog=shipped
    )
    assert rec.best["meets"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"time_budget": -5}, "a time budget must be more than 0 hours"),
        ({"time_budget": "0h"}, "a time budget must be more than 0 hours"),
        ({"time_budget": "soon"}, "is not a duration; write it like 24h"),
        ({"cost_budget": -100}, r"a cost budget must be more than \$0"),
        ({"cost_budget": "lots"}, "is not an amount of dollars"),
        ({"time_budget": "1h", "cost_budget": 5}, "give exactly one budget"),
        ({}, "give exactly one budget"),
        ({"time_budget": "1h", "max_risk": 1.5}, r"max_risk is a probability in \[0, 1\)"),
        ({"time_budget": "1h", "max_instances": 0}, "max_instances must be 1..4096"),
    ],
)
def test_bad_budgets_and_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RecommendError, match=message):
        recommendation(FakePredictor(), steps=10, **options)


@pytest.mark.parametrize(
    ("work", "job", "message"),
    [
        ({}, Job(), "exactly one of steps, samples, tokens or epochs"),
        ({"steps": 5, "samples": 5}, Job(), "exactly one of steps, samples, tokens or epochs"),
        ({"steps": -5}, Job(), "must be > 0 steps"),
        ({"samples": 1000}, Job(), "needs the batch per rank to count steps: give batch_size"),
        ({"tokens": 1e9}, Job(batch_size=8), "needs the tokens per sample: give seq_len"),
        ({"epochs": 3}, Job(batch_size=8), "needs the samples per epoch: give dataset_samples"),
    ],
)
def test_work_that_cannot_be_counted(work: dict[str, Any], job: Job, message: str) -> None:
    with pytest.raises(RecommendError, match=message):
        recommendation(FakePredictor(), time_budget="1h", job=job, **work)


def test_job_facts_are_checked() -> None:
    with pytest.raises(RecommendError, match="needs the measured batch per rank"):
        Job(global_batch=64)
    with pytest.raises(RecommendError, match="is not a whole number of measured batches of 6"):
        Job(batch_size=6, global_batch=64)
    with pytest.raises(RecommendError, match="memory_gb must be a number of GB > 0"):
        Job(memory_gb=-1)


def test_samples_tokens_and_epochs_convert_to_the_same_steps(shipped: pl.DataFrame) -> None:
    job = Job(batch_size=16, seq_len=512, dataset_samples=1_000_000)
    runs = [
        {"samples": 3_000_000},
        {"tokens": 3_000_000 * 512},
        {"epochs": 3},
        {"steps": 3_000_000 / (2 * 16)},  # steps of the measured global batch: 2 ranks x 16
    ]
    got = [
        recommendation(FakePredictor(), time_budget="48h", job=job, catalog=shipped, **w)
        .candidates.sort("config", "market")
        .select("config", "steps", "hours", "cost")
        for w in runs
    ]
    for other in got[1:]:
        assert other.equals(got[0])


def test_unknown_gpu_and_malformed_catalog(shipped: pl.DataFrame, tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"unknown GPU 'X100': nearest: .*known GPUs:"):
        recommendation(FakePredictor(), steps=10, time_budget="1h", gpus=["X100"], catalog=shipped)
    bad = tmp_path / "mine.csv"
    shipped.head(3).with_columns(price_per_hour=pl.Series(["1.0", "cheap", "2.0"])).write_csv(bad)
    with pytest.raises(CatalogError, match=rf"{re.escape(str(bad))}, row 2, column price_per_hour"):
        recommendation(FakePredictor(), steps=10, time_budget="1h", catalog=bad)


def test_a_selection_with_no_instance(shipped: pl.DataFrame) -> None:
    with pytest.raises(RecommendError, match=r"no instance in the catalog matches .*region mars-1"):
        recommendation(
            FakePredictor(), steps=10, time_budget="1h", catalog=shipped, region="mars-1"
        )


def test_memory_and_unpredictable_devices_are_left_out_with_reasons(shipped: pl.DataFrame) -> None:
    rec = recommendation(
        FakePredictor(), steps=100_000, time_budget="24h", catalog=shipped, job=Job(memory_gb=40)
    )
    assert rec.candidates["gpu"].is_in(["T4", "L4", "A10G", "A10", "V100-SXM2-32GB"]).sum() == 0
    reasons = rec.excluded["reason"].to_list()
    assert "the job needs 40 GB per GPU; its T4 has 16 GB" in reasons
    assert "not predicted" not in " ".join(reasons)  # A10G is left out for memory first
    rec = recommendation(FakePredictor(), steps=100_000, time_budget="24h", catalog=shipped)
    a10g = rec.excluded.filter(pl.col("instance") == "g5.xlarge")
    assert a10g["reason"].to_list() == ["not predicted: A10G has no sourced fp16 peak"]
    assert a10g["counts"].to_list() == ["1-16"]
    lam = rec.excluded.filter(pl.col("instance") == "gpu_1x_a10")
    assert lam["counts"].to_list() == ["2-16"] and "no network bandwidth" in lam["reason"][0]


def test_a_global_batch_is_kept_by_accumulation() -> None:
    cat = _catalog(_row("one.1x", "H100", 80, 1, 4.0), _row("three.3x", "H100", 80, 3, 12.0))
    rec = recommendation(
        FakePredictor(),
        steps=1000,
        time_budget="24h",
        catalog=cat,
        max_instances=8,
        job=Job(batch_size=4, global_batch=64),
    )
    got = rec.candidates.select("config", "ranks", "accumulation", "steps")
    for config, ranks, acc, steps in got.iter_rows():
        assert ranks * 4 * acc == 64 and steps == 1000, config
    assert set(got["ranks"]) == {1, 2, 4, 8}
    bad = rec.excluded.filter(pl.col("instance") == "three.3x").row(0, named=True)
    assert bad["counts"] == "1-8" and "does not divide the global batch of 64" in bad["reason"]
    odd = rec.excluded.filter(pl.col("instance") == "one.1x")["counts"].to_list()
    assert odd == ["3, 5-7"]


def test_spot_rows_rates_and_risk(shipped: pl.DataFrame) -> None:
    rec = recommendation(
        FakePredictor(), steps=2_000_000, time_budget="24h", catalog=shipped, spot=True
    )
    spot = rec.candidates.filter(pl.col("market") == "spot")
    assert spot.height > 0 and set(spot["cloud"]) == {"aws"}  # the table rates AWS alone
    assert (spot["hours"] >= spot["work_hours"]).all() and (spot["risk"] >= 0).all()
    assert not any("the published bands for" in n for n in rec.notes)  # the catalog's region
    assert any("are lower bounds (the top band" in n for n in rec.notes)
    elsewhere = load_spot_interruptions().with_columns(region=pl.lit("ap-northeast-1"))
    borrowed = recommendation(
        FakePredictor(),
        steps=2_000_000,
        time_budget="24h",
        catalog=shipped,
        spot=True,
        interruptions=elsewhere,
    )
    assert any(
        "the published bands for ap-northeast-1 (the table has none for us-east-1)" in n
        for n in borrowed.notes
    )
    gcp = rec.excluded.filter((pl.col("cloud") == "gcp") & pl.col("reason").str.starts_with("spot"))
    assert gcp.height > 0 and "--interruption-rate" in gcp["reason"][0]
    given = recommendation(
        FakePredictor(),
        steps=2_000_000,
        time_budget="24h",
        catalog=shipped,
        spot=True,
        interruption_rate=0.01,
    )
    assert "gcp" in set(given.candidates.filter(pl.col("market") == "spot")["cloud"])
    od = given.candidates.filter(pl.col("market") == "on-demand")
    assert set(od["risk"]) <= {0.0, 1.0}


def test_max_risk_decides_whether_spot_meets_the_deadline() -> None:
    cat = _catalog(_row("x.8x", "H100", 80, 8, 50.0, spot=10.0))
    opts: dict[str, Any] = {
        "steps": 3_000_000,
        "catalog": cat,
        "spot": True,
        "interruption_rate": 0.02,
        "max_instances": 1,
    }
    work = recommendation(FakePredictor(), time_budget="1000h", **opts).candidates
    hours = work.filter(pl.col("market") == "on-demand")["hours"][0]
    budget = hours * 1.05
    loose = recommendation(FakePredictor(), time_budget=budget, max_risk=0.99, **opts)
    risk = loose.candidates.filter(pl.col("market") == "spot")["risk"][0]
    assert 0.01 < risk < 0.99 and loose.best["market"] == "spot"
    assert f"{short(100 * risk)} % risk of missing" in loose.why
    strict = recommendation(FakePredictor(), time_budget=budget, max_risk=risk / 2, **opts)
    assert strict.best["market"] == "on-demand"


def test_mixes_fill_gaps_between_single_types() -> None:
    cat = _catalog(
        _row("h100.8x", "H100", 80, 8, 60.0, network=3200.0),
        _row("a100.8x", "A100-80GB", 80, 8, 25.0, network=3200.0),
        _row("v100.1x", "V100-32GB", 32, 1, 3.0),  # another size: never mixed with the 8-GPU ones
    )
    opts: dict[str, Any] = {"steps": 5_000_000, "catalog": cat, "max_instances": 4}
    plain = recommendation(FakePredictor(), time_budget="100h", **opts)
    mixed = recommendation(FakePredictor(), time_budget="100h", mix=True, **opts)
    mixes = mixed.candidates.filter("mix")
    assert mixes.height > 0
    assert set(mixes["instance"]) == {"a100.8x+h100.8x"} or set(mixes["instance"]) == {
        "h100.8x+a100.8x"
    }
    single = plain.candidates
    for hours, cost in mixes.select("hours", "cost").iter_rows():
        assert not ((single["hours"] <= hours) & (single["cost"] <= cost)).any()
    assert any(n.startswith("mixes: ") for n in mixed.notes)
    # a mix on the front is shown there
    assert mixed.pareto.height >= plain.pareto.height


def test_a_winner_by_price_is_explained_by_its_price() -> None:
    cat = _catalog(
        _row("cheap.4x", "H100", 80, 4, 10.0, network=3200.0),
        _row("dear.8x", "H100", 80, 8, 40.0, network=3200.0),
    )
    rec = recommendation(FakePredictor(), steps=1_000_000, time_budget="10h", catalog=cat)
    assert rec.best["instance"] == "cheap.4x"
    assert re.search(
        r"cheap\.4x x \d+: \$2\.50 per GPU-hour against \$5\.00 on dear\.8x x \d+ .*; the work "
        r"takes [\d.]+ GPU-hours here and [\d.]+ there\.",
        rec.why,
    ), rec.why


def test_short_numbers() -> None:
    assert [short(x) for x in (0.0011, 2.54, 9.96, 12.4, 99.6, 1234.5)] == [
        "0.0011",
        "2.5",
        "10",
        "12",
        "100",
        "1,234",
    ]
