"""What makes a configuration that does not fit in memory fit (``_fit``): each combination of
the memory savers it lacks, predicted on the same GPUs, and a lower bound on the GPUs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from stallscope import plan
from stallscope.cli.main import cli
from stallscope.plan._fit import GIB, min_gpus

# GPT-3 175B on 16 DGX A100 nodes, tp 8, pp 2, dp 8, micro-batch 4, no saver: 277 GiB per GPU
BIG = {"nodes": 16, "tp": 8, "pp": 2, "micro_batch": 4, "global_batch": 256}


@pytest.fixture(scope="module")
def big() -> plan.Prediction:
    p = plan.predict_model("gpt3-175b", "dgx-a100", **BIG)  # type: ignore[arg-type]
    assert not p.memory.fits
    return p


def _flags(change: str) -> dict[str, object]:
    """The predict_model keywords of a change's command-line flags."""
    words = change.split()
    out: dict[str, object] = {}
    i = 0
    while i < len(words):
        flag = words[i].removeprefix("--").replace("-", "_")
        if flag == "sequence_parallel":
            out[flag] = True
            i += 1
        else:
            value = words[i + 1]
            out[flag] = int(value) if value.isdigit() else value
            i += 2
    return out


def test_each_fix_is_the_prediction_with_its_flags(big: plan.Prediction) -> None:
    fixes = big.memory_fixes()
    assert fixes.columns == ["change", "changes", "memory_GiB", "fits", "step_s"]
    assert fixes.filter("fits").height > 0
    for r in fixes.head(4).iter_rows(named=True):  # the fitting ones, fastest first
        p = plan.predict_model("gpt3-175b", "dgx-a100", **(BIG | _flags(r["change"])))  # type: ignore[arg-type]
        assert p.memory.total / GIB == pytest.approx(r["memory_GiB"])
        assert p.step_ns / 1e9 == pytest.approx(r["step_s"])
        assert p.memory.fits == r["fits"] is True
        assert r["changes"] == r["change"].count("--")


def test_fixes_are_ranked_fitting_then_fastest_without_idle_flags(big: plan.Prediction) -> None:
    fixes = big.memory_fixes()
    fits = fixes["fits"].to_list()
    assert fits == sorted(fits, reverse=True)
    fit = fixes.filter("fits")["step_s"].to_list()
    assert fit == sorted(fit)
    # selective recompute saves nothing beside flash attention: never a row of its own
    pairs = list(zip(fixes["memory_GiB"].round(6), fixes["step_s"].round(9), strict=True))
    assert len(pairs) == len(set(pairs))
    assert "--zero 3 --recompute full --sequence-parallel --micro-batch 1" in fixes["change"]


def test_savers_that_cannot_apply_are_not_tried() -> None:
    # one data-parallel replica (nothing for ZeRO to shard over), tp 1, micro-batch 1
    p = plan.predict_model(
        "gpt3-6.7b", "dgx-a100", nodes=1, tp=1, pp=8, micro_batch=1, global_batch=8
    )
    changes = " ".join(p.memory_fixes()["change"])
    assert "--zero" not in changes
    assert "--sequence-parallel" not in changes
    assert "--micro-batch" not in changes
    assert "--recompute full" in changes


def test_min_gpus_is_a_lower_bound_the_search_confirms(big: plan.Prediction) -> None:
    n = min_gpus(big.model, big.system, big.strategy)
    states = big.model.params() * (2 + 2 + 12)  # bf16 weights and gradients, Adam in fp32
    assert n == math.ceil(math.ceil(states / (80 * GIB)) / 8) * 8 == big.min_gpus() == 40
    # within one node the bound is not rounded: a 6.7B model's states fit on 2 GPUs of 80 GB
    small = plan.predict_model(
        "gpt3-6.7b", "dgx-a100", nodes=1, tp=8, micro_batch=1, global_batch=8
    )
    assert small.min_gpus() == math.ceil(small.model.params() * 16 / (80 * GIB)) == 2
    with pytest.raises(plan.PlanError, match="no configuration") as err:
        plan.plan("gpt3-175b", "dgx-a100", gpus=n - 8, global_batch=256)
    assert "add GPUs (the weights, gradients and optimizer state alone need at least 40)" in str(
        err.value
    )


def test_predict_cli_says_what_fits_and_writes_it_to_json(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    args = ["predict", "--model", "gpt3-175b", "--system", "dgx-a100", "--nodes", "16", "--tp", "8"]
    args += ["--pp", "2", "--dp", "8", "--micro-batch", "4", "--global-batch", "256"]
    res = CliRunner().invoke(cli, [*args, "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "does not fit: needs" in res.output
    line = next(x for x in res.output.splitlines() if x.startswith("fits with: "))
    assert line.count(" GiB, step ") == 3  # the three fastest
    doc = json.loads(out.read_text())
    fixes = doc["memory_fixes"]
    assert fixes["min_gpus"] == 40
    first = fixes["changes"][0]
    assert first["fits"] and line.startswith(f"fits with: {first['change']} (")


def test_predict_cli_names_the_gpus_needed_when_no_saver_fits() -> None:
    args = ["predict", "--model", "gpt3-175b", "--system", "dgx-a100", "--nodes", "1", "--tp", "8"]
    args += ["--pp", "1", "--dp", "1", "--micro-batch", "1", "--global-batch", "16"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "no memory saver makes it fit on these 8 GPUs" in res.output
    assert "need at least 40 GPUs of 80 GB" in res.output
    assert "stallscope plan --gpus N (N >= 40)" in res.output


def test_a_fitting_configuration_prints_no_fixes() -> None:
    args = ["predict", "--model", "gpt3-6.7b", "--system", "dgx-a100", "--nodes", "1"]
    args += ["--tp", "8", "--pp", "1", "--dp", "1", "--micro-batch", "1", "--global-batch", "8"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "does not fit" not in res.output and "fits with" not in res.output
