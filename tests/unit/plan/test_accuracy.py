"""The accuracy line the planner prints comes from the last public-accuracy benchmark, and
stays in step with its committed result."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
from stallscope.plan._accuracy import accuracy, accuracy_note

REPO = Path(__file__).resolve().parents[3]


def _bench() -> object:
    if str(REPO / "bench") not in sys.path:  # its sibling modules
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(
        "predict_public", REPO / "bench/predict_public.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_shipped_summary_is_the_committed_results() -> None:
    result = json.loads((REPO / "bench/results/predict_public.json").read_text())
    want = _bench().accuracy_summary(result)  # type: ignore[attr-defined]
    assert accuracy() == want, "rerun python bench/predict_public.py"
    assert want["runs"] == result["counted"]
    assert 0 <= want["too_fast"] <= want["runs"]


def test_plan_and_predict_print_it() -> None:
    a = accuracy()
    assert a is not None
    overall = accuracy_note()
    assert f"against {a['runs']} published training runs" in overall
    assert ("too short on average" in overall) == (a["mean_error"] < 0)
    own = a["per_gpu"]["A100-SXM4-80GB"]  # the GPU of dgx-a100: its own runs' figures
    note = accuracy_note("A100-SXM4-80GB")
    assert f"against the {own['runs']} published training runs on A100-SXM4-80GB" in note
    side = "short" if own["mean_error"] < 0 else "long"
    assert f"% too {side} on average" in note
    res = CliRunner().invoke(
        cli, ["plan", "--model", "gpt3-6.7b", "--system", "dgx-a100", "--gpus", "8", "--top", "1"]
    )
    assert res.exit_code == 0, res.output
    assert note in res.output
    res = CliRunner().invoke(
        cli,
        ["predict", "--model", "gpt3-6.7b", "--system", "dgx-a100", "--nodes", "1", "--tp", "8",
         "--micro-batch", "1", "--global-batch", "8"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert note in res.output
    res = CliRunner().invoke(cli, [*WHATIF, "--knob", "nic=1"])
    assert res.exit_code == 0, res.output
    assert note in res.output


WHATIF = ["whatif", "--model", "gpt3-6.7b", "--system", "dgx-a100", "--gpus", "8"]


def test_the_json_outputs_carry_it() -> None:
    import orjson

    for args in (
        ["plan", "--model", "gpt3-6.7b", "--system", "dgx-a100", "--gpus", "8", "--top", "1"],
        ["predict", "--model", "gpt3-6.7b", "--system", "dgx-a100", "--nodes", "1", "--tp", "8",
         "--micro-batch", "1", "--global-batch", "8"],
        [*WHATIF, "--knob", "nic=1"],
    ):  # fmt: skip
        res = CliRunner().invoke(cli, [*args, "--json", "-"])
        assert res.exit_code == 0, res.output
        assert orjson.loads(res.output)["accuracy"] == accuracy()


def test_the_note_says_bounds_only_when_nearly_every_run_errs_one_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import stallscope.plan._accuracy as acc

    def note(too_fast: int, mean: float) -> str:
        doc = {"runs": 100, "too_fast": too_fast, "mean_error": mean, "mean_abs_error": 0.11,
               "max_abs_error": 0.3, "date": "2026-11-28"}  # fmt: skip
        monkeypatch.setattr(acc, "accuracy", lambda: doc)
        return acc.accuracy_note()

    assert note(98, -0.13).endswith("read them as lower bounds")
    assert note(5, 0.1).endswith("read them as upper bounds")
    assert note(78, -0.09).endswith("most are lower bounds, give or take 11 %")
    assert "9 % too short on average (78 of 100 too short" in note(78, -0.09)
    assert note(30, 0.02).endswith("most are upper bounds, give or take 11 %")


def test_a_gpu_with_few_runs_gets_the_overall_figures_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import stallscope.plan._accuracy as acc

    def fig(runs: int, too_fast: int, mean: float) -> dict[str, object]:
        return {"runs": runs, "too_fast": too_fast, "mean_error": mean, "mean_abs_error": 0.1,
                "max_abs_error": 0.2}  # fmt: skip

    doc = fig(100, 80, -0.08) | {"date": "2026-11-28"}
    doc["per_gpu"] = {"GB200": fig(18, 18, -0.14), "B200": fig(1, 1, -0.1)}
    monkeypatch.setattr(acc, "accuracy", lambda: doc)
    gb = acc.accuracy_note("GB200")
    assert (
        "against the 18 published training runs on GB200 the predicted steps are 14 % too short"
        in gb
    )
    assert gb.endswith("read them as lower bounds")  # all 18 err one way
    assert acc.accuracy_note("B200").startswith("accuracy: 1 published run on B200; against 100")
    assert acc.accuracy_note("MI300X").startswith("accuracy: no published runs on MI300X; against")
    assert acc.accuracy_note() == acc.accuracy_note("")  # no GPU: the overall line alone
