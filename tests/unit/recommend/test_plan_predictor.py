"""The recommender on the planner: a model never run, each cloud configuration in the parallel
layout the planner finds fastest; its rows, its job, its notes, and the CLI's --model."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from stallscope.analysis import STALL_COLUMNS
from stallscope.cli.main import cli
from stallscope.plan import load_system, plan
from stallscope.recommend import Job, PlanPredictor, RecommendError, Shape, recommendation
from stallscope.recommend._catalog import CATALOG_SCHEMA
from tests.unit.plan.conftest import SMALL_GATED

_DAY = datetime.date(2026, 11, 1)
H100 = Shape("H100-SXM", nodes=1, ranks_per_node=8, intra_node_GBps=450.0, network_gbps=None)
T4 = Shape("T4", nodes=1, ranks_per_node=1, intra_node_GBps=16.0, network_gbps=None)


def _row(
    instance: str, gpu: str, mem: float, gpus: int, price: float, intra: float
) -> dict[str, Any]:
    return {
        "cloud": "aws", "region": "us-east-1", "instance": instance, "gpu": gpu, "gpus": gpus,
        "gpu_memory_gb": mem, "vcpus": 96, "memory_gb": 1024.0, "intra_node_GBps": intra,
        "network_gbps": 3200.0, "price_per_hour": price, "spot_price_per_hour": None,
        "source": "https://example.com/test", "date": _DAY,
    }  # fmt: skip


CATALOG = pl.DataFrame(
    [_row("h100.8x", "H100", 80, 8, 40.0, 450.0), _row("a100.8x", "A100", 80, 8, 20.0, 300.0)],
    schema=CATALOG_SCHEMA,
    orient="row",
)


@pytest.fixture
def small() -> PlanPredictor:
    return PlanPredictor(SMALL_GATED, global_batch=64)


def test_a_shape_gets_the_planners_fastest_layout(small: PlanPredictor) -> None:
    got = small.predict([H100])
    row = got.row(0, named=True)
    assert row["problem"] is None and row["layout"].startswith("tp")
    # the same search the plan verb runs on that system
    system = load_system({"gpu": "H100-SXM", "gpus_per_node": 8, "intra_node_GBps": 450.0,
                          "inter_node_Gbps": 1.0})  # fmt: skip
    best = plan(small.model, system, 8, global_batch=64, top=1).table.row(0, named=True)
    assert row["step_ns"] == pytest.approx(best["step_s"] * 1e9, rel=1e-6)
    # the stall columns, the bubble counted as sync wait, sum to the step
    assert sum(row[c] for c in STALL_COLUMNS) == pytest.approx(row["step_ns"], rel=1e-6)


def test_no_fit_mix_and_repeats(small: PlanPredictor) -> None:
    big = PlanPredictor("llama3-70b", global_batch=64)
    row = big.predict([T4]).row(0, named=True)
    assert row["step_ns"] is None and "fits" in row["problem"] and "GiB" in row["problem"]
    mixed = Shape("H100-SXM", 1, 8, 450.0, None, compute_scale=1.2)
    assert "one GPU type" in small.predict([mixed]).row(0, named=True)["problem"]
    with pytest.raises(RecommendError, match="needs a measured run"):
        small.compute_scale("H100-SXM")
    calls = small.calls
    small.predict([H100, H100])
    small.predict([H100])
    assert small.calls == calls + 1  # one search per distinct shape


def test_its_job_is_a_global_batch_of_sequences(small: PlanPredictor) -> None:
    assert small.job == Job(batch_size=1, global_batch=64, seq_len=SMALL_GATED["seq_len"])
    default = PlanPredictor(SMALL_GATED)
    assert default.global_batch > 0 and "--global-batch sets it" in default.basis
    assert PlanPredictor(SMALL_GATED, seq_len=1024).job.seq_len == 1024
    with pytest.raises(RecommendError, match="nearest"):
        PlanPredictor("llama3-70")
    with pytest.raises(RecommendError, match="global_batch"):
        PlanPredictor(SMALL_GATED, global_batch=0)


def test_recommendation_end_to_end(small: PlanPredictor) -> None:
    tokens = 64 * SMALL_GATED["seq_len"] * 1000  # 1000 steps
    rec = recommendation(small, tokens=tokens, time_budget="30d", catalog=CATALOG,
                         max_instances=2)  # fmt: skip
    assert rec.best["layout"] and rec.best["steps"] == 1000
    assert rec.pareto["layout"].is_not_null().all()
    joined = " ".join(rec.notes)
    assert "the planner (docs/plan.md)" in joined
    assert "global batches of 64 sequences" in joined
    assert "memory is not checked" not in joined
    # the same job given whole is taken; another is refused, as are mixes
    again = recommendation(small, tokens=tokens, time_budget="30d", catalog=CATALOG,
                           max_instances=2, job=small.job)  # fmt: skip
    assert again.best["config"] == rec.best["config"]
    with pytest.raises(RecommendError, match="planned model's job"):
        recommendation(small, tokens=tokens, time_budget="30d", catalog=CATALOG,
                       job=Job(batch_size=4, global_batch=64))  # fmt: skip
    with pytest.raises(RecommendError, match="mixes of two instance types need a measured run"):
        recommendation(small, tokens=tokens, time_budget="30d", catalog=CATALOG, mix=True)


def test_cli_model_mode(tmp_path: Path) -> None:
    model = tmp_path / "small.json"
    model.write_text(json.dumps(SMALL_GATED))
    catalog = tmp_path / "catalog.csv"
    CATALOG.write_csv(catalog)
    base = ["recommend", "--model", str(model), "--global-batch", "64", "--steps", "1000",
            "--time-budget", "30d", "--catalog", str(catalog), "--max-instances", "2"]  # fmt: skip
    res = CliRunner().invoke(cli, base)
    assert res.exit_code == 0, res.output
    assert f"For {model} (planned):" in res.output
    assert "layout (planned)" in res.output and "the planner (docs/plan.md)" in res.output
    res = CliRunner().invoke(cli, [*base, "--json", "-"])
    doc = json.loads(res.output)
    assert doc["run"] == [f"{model} (planned)"] and doc["best"]["layout"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--batch-size", "4"], "--batch-size is not taken with --model"),
        (["--memory-gb", "40"], "--memory-gb is not taken with --model"),
        (["--mix"], "--mix is not taken with --model"),
        (["--compute-scale", "A10G=2"], "--compute-scale is not taken with --model"),
        (["."], "give RUN (a measured job) or --model, not both"),
    ],
)
def test_cli_refuses_run_options_with_a_model(extra: list[str], message: str) -> None:
    args = ["recommend", "--model", "llama3-8b", "--steps", "10", "--time-budget", "1d", *extra]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and message in res.output


def test_cli_needs_a_run_or_a_model() -> None:
    res = CliRunner().invoke(cli, ["recommend", "--steps", "10", "--time-budget", "1d"])
    assert res.exit_code == 2 and "give RUN (a measured job) or --model" in res.output
    res = CliRunner().invoke(cli, ["recommend", ".", "--stack", "nemo-25", "--steps", "1",
                                   "--time-budget", "1d"])  # fmt: skip
    assert res.exit_code == 2 and "--stack is an option of --model" in res.output


def test_an_anchored_gpu_runs_at_its_measured_rate(small: PlanPredictor, tmp_path: Path) -> None:
    from stallscope.recommend._plan_predictor import anchor_factors

    slow = PlanPredictor(SMALL_GATED, global_batch=64, compute_factors={"H100": 0.5})
    assert slow.compute_factors == {"H100-SXM": 0.5}  # the device table's name
    base, anchored = small.predict([H100]).row(0), slow.predict([H100]).row(0)
    assert anchored[0] > 1.3 * base[0]  # GEMMs and attention twice as long
    assert "H100-SXM's GEMMs and attention at 0.500 x its rate" in slow.basis
    assert "the other GPUs not anchored" in slow.basis
    t4 = Shape("T4", nodes=1, ranks_per_node=8, intra_node_GBps=16.0, network_gbps=None)
    assert slow.predict([t4]).row(0) == small.predict([t4]).row(0)  # other GPUs: blind
    with pytest.raises(RecommendError, match="must be a positive number"):
        PlanPredictor(SMALL_GATED, compute_factors={"H100": 0})
    with pytest.raises(RecommendError, match=r"compute factor: .*X100"):
        PlanPredictor(SMALL_GATED, compute_factors={"X100": 1.0})
    # the system files predict --save-system writes
    good = tmp_path / "h100.json"
    good.write_text(json.dumps({"gpu": "H100-SXM", "compute_factor": 0.8, "gpus_per_node": 8}))
    assert anchor_factors([good]) == {"H100-SXM": 0.8}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gpu": "H100-SXM"}))
    with pytest.raises(RecommendError, match="gpu and compute_factor"):
        anchor_factors([bad])
    res = CliRunner().invoke(
        cli, ["recommend", ".", "--anchor", str(good), "--steps", "1", "--time-budget", "1d"]
    )
    assert res.exit_code == 2 and "--anchor is an option of --model" in res.output
