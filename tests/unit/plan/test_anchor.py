"""Anchoring on a measured step: the compute factor that reproduces it, what it scales and what
it leaves alone, the anchored system file, bad input, and the CLI's --measured-step."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
from stallscope.plan import (
    Cluster,
    Model,
    PlanError,
    Prediction,
    anchor,
    load_model,
    load_system,
    predict_model,
    predict_strategy,
)
from stallscope.plan._cluster import anchored, preset_doc, system_doc

from .conftest import DGX_A100, SMALL_GATED


@pytest.fixture
def blind(a100: Cluster) -> Prediction:
    # 2 nodes: tensor-parallel all-reduces on NVLink, data-parallel ones across the NICs
    return predict_model(
        load_model(SMALL_GATED), a100, nodes=2, tp=2, pp=2, micro_batch=1, global_batch=64
    )


@pytest.mark.parametrize("ratio", [0.8, 1.0, 1.1, 1.5])
def test_the_factor_reproduces_the_measured_step(blind: Prediction, ratio: float) -> None:
    measured = blind.step_ns * 1e-9 * ratio
    a = anchor(blind, measured)
    assert a.prediction.step_ns * 1e-9 == pytest.approx(measured, rel=1e-4)
    assert a.measured_step_s == measured
    assert a.blind is blind
    assert a.blind_error == pytest.approx(1 / ratio - 1)
    # a slower run than predicted means slower compute, and the other way round
    if ratio > 1:
        assert a.factor < 1
    elif ratio < 1:
        assert a.factor > 1
    else:
        assert a.factor == pytest.approx(1, rel=1e-3)
    assert a.prediction.strategy == blind.strategy
    assert a.system.device.compute_factor == a.factor


def test_it_scales_gemms_and_attention_alone(a100: Cluster) -> None:
    dev = anchored(a100.device, 0.5)
    assert dev.gemm_s(4096, 4096, 4096, "bf16") == pytest.approx(
        2 * a100.device.gemm_s(4096, 4096, 4096, "bf16")
    )
    fwd, bwd = a100.device.attention_s(1, 16, 4096, 128, True, "bf16")
    assert dev.attention_s(1, 16, 4096, 128, True, "bf16") == pytest.approx((2 * fwd, 2 * bwd))
    # memory-bound kernels and the datasheet peaks keep their figures
    assert dev.memory_s(1e9, 3) == a100.device.memory_s(1e9, 3)
    assert dev.peak("bf16") == a100.device.peak("bf16")
    assert "compute_factor" in dev.basis["compute"]
    assert anchored(dev, 0.5) is dev


def test_mfu_stays_against_the_datasheet_peak(blind: Prediction) -> None:
    a = anchor(blind, 1.25 * blind.step_ns * 1e-9)
    assert a.prediction.model_flops == blind.model_flops
    assert a.prediction.mfu == pytest.approx(blind.mfu / 1.25, rel=1e-4)


def test_communication_keeps_its_time(a100: Cluster) -> None:
    # with nothing to hide behind, a slower GPU adds only compute: the collectives' columns
    # (blocking all-reduces under plain data parallelism, the tensor-parallel ones blocking
    # too) are the same on both systems
    m = load_model(SMALL_GATED)
    blocking = {"preset": "megatron-core", "tp_backward_overlap": False}
    p = predict_model(m, a100, nodes=2, tp=8, micro_batch=1, global_batch=16, stack=blocking)
    a = anchor(p, 1.3 * p.step_ns * 1e-9)
    before, after = p.columns(), a.prediction.columns()
    assert before["interconnect_ns"] > 0
    assert after["compute_ns"] > before["compute_ns"]
    assert after["interconnect_ns"] == pytest.approx(before["interconnect_ns"], rel=0.02)


def test_an_anchored_system_anchors_again_to_itself(blind: Prediction) -> None:
    a = anchor(blind, 1.2 * blind.step_ns * 1e-9)
    again = anchor(a.prediction, a.measured_step_s)
    assert again.factor == pytest.approx(a.factor, rel=1e-3)
    # and a second measurement composes: the factor is the system's, not a ratio to it
    faster = anchor(a.prediction, blind.step_ns * 1e-9)
    assert faster.factor == pytest.approx(1, rel=1e-3)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_a_step_must_be_a_positive_number(blind: Prediction, bad: float) -> None:
    with pytest.raises(PlanError, match="measured step"):
        anchor(blind, bad)


def test_a_step_no_factor_reaches_names_the_cause(blind: Prediction) -> None:
    with pytest.raises(PlanError, match=r"shorter than .* even with GEMMs and attention 20x"):
        anchor(blind, 1e-6)
    with pytest.raises(PlanError, match=r"longer than .* check the measured time"):
        anchor(blind, 1e6)


def test_the_system_file_round_trip(blind: Prediction) -> None:
    a = anchor(blind, 1.15 * blind.step_ns * 1e-9)
    doc = a.system_doc(DGX_A100)
    assert doc["compute_factor"] == pytest.approx(a.factor, rel=1e-4)
    assert doc["anchored_on"]["config"] == blind.strategy.label()
    assert doc["anchored_on"]["measured_step_s"] == a.measured_step_s
    system = load_system(json.loads(json.dumps(doc)))
    again = predict_strategy(blind.model, system, blind.strategy)
    assert again.step_ns == pytest.approx(a.prediction.step_ns, rel=1e-4)
    # a system given by preset or file becomes a system file's keys
    assert system_doc("dgx-a100")[0] == preset_doc("dgx-a100")
    assert system_doc(DGX_A100)[0] == DGX_A100


@pytest.mark.parametrize("bad", [0, -0.5, "fast", True])
def test_a_bad_compute_factor_is_refused(bad: object) -> None:
    with pytest.raises(PlanError, match="compute_factor must be a positive number"):
        load_system(DGX_A100 | {"compute_factor": bad})


def test_plan_on_the_anchored_system_is_slower(small: Model, a100: Cluster) -> None:
    from stallscope.plan import plan

    slow = load_system(DGX_A100 | {"compute_factor": 0.8})
    base = plan(small, a100, gpus=8, global_batch=64, top=1).table.row(0, named=True)
    anch = plan(small, slow, gpus=8, global_batch=64, top=1).table.row(0, named=True)
    assert anch["step_s"] > base["step_s"]


PREDICT = ["predict", "--model", "gpt3-6.7b", "--system", "dgx-a100", "--nodes", "1",
           "--tp", "8", "--micro-batch", "1", "--global-batch", "8"]  # fmt: skip


def test_cli_measured_step_and_save_system(tmp_path: Path) -> None:
    from stallscope.plan._accuracy import accuracy

    runner = CliRunner()
    blind = runner.invoke(cli, [*PREDICT, "--json", "-"])
    assert blind.exit_code == 0, blind.output
    step = json.loads(blind.output)["predictions"][0]["step_ns"] * 1e-9
    out = tmp_path / "anchored.json"
    res = runner.invoke(
        cli, [*PREDICT, "--measured-step", f"{1.1 * step:.6f}", "--save-system", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert f"anchored on the measured {1.1 * step:.3f} s" in res.output
    assert "blind prediction" in res.output and "-9.1 %" in res.output
    assert f"wrote {out}" in res.output
    an = (accuracy() or {}).get("anchored")
    if an:  # the anchored figures of the public benchmark
        assert f"{an['same_model']['runs']} published runs" in res.output
    doc = json.loads(out.read_text())
    assert doc["gpu"] == "A100-SXM4-80GB" and doc["compute_factor"] < 1
    again = runner.invoke(cli, ["plan", "--model", "gpt3-6.7b", "--system", str(out),
                                "--gpus", "8", "--top", "1"])  # fmt: skip
    assert again.exit_code == 0, again.output
    assert "compute factor of dgx-a100: GEMMs and attention at" in again.output
    js = runner.invoke(cli, [*PREDICT, "--measured-step", f"{1.1 * step:.6f}", "--json", "-"])
    anchor_doc = json.loads(js.output)["anchor"]
    assert anchor_doc["measured_step_s"] == pytest.approx(1.1 * step, rel=1e-6)
    assert anchor_doc["anchored_step_s"] == pytest.approx(1.1 * step, rel=1e-4)


def test_cli_refuses_save_system_alone_and_model_options_on_a_run(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(cli, [*PREDICT, "--save-system", str(tmp_path / "x.json")])
    assert res.exit_code != 0 and "give --measured-step" in res.output
    res = runner.invoke(cli, [*PREDICT, "--measured-step", "1e-7"])
    assert res.exit_code == 1 and "shorter than" in res.output
    run = tmp_path / "run"
    run.mkdir()
    res = runner.invoke(cli, ["predict", str(run), "--measured-step", "3"])
    assert res.exit_code != 0 and "--measured-step is an option of the model mode" in res.output


def test_the_anchored_accuracy_line() -> None:
    from stallscope.plan._accuracy import accuracy, accuracy_note

    a = accuracy()
    assert a is not None and a.get("anchored"), "rerun python bench/predict_public.py"
    an = a["anchored"]
    same = an["same_model"]
    note = accuracy_note("H100-SXM", anchored=True)
    assert note.startswith("accuracy: anchored on measured steps of the same model, software")
    assert f"{same['runs']} published runs" in note
    assert f"{100 * same['mean_abs_error']:.1f} % off on average" in note
    assert f"on other models' steps {100 * an['mean_abs_error']:.1f} %" in note
    # mixture-of-experts models and unanchored systems keep the blind line
    assert "anchored" not in accuracy_note("H100-SXM", moe=True, anchored=True)
    assert "anchored" not in accuracy_note("H100-SXM")


KINETO = Path(__file__).resolve().parents[2] / "data" / "kineto"


def test_a_measured_run_gives_its_median_step() -> None:
    from stallscope.plan._anchor import measured_step

    seconds, where, ranks = measured_step(KINETO / "h200_transformer_1rank")
    assert 1e-3 < seconds < 1e-1  # one small encoder layer's training step, a few ms
    assert where.startswith("the median step of") and "NVIDIA H200" in where
    assert ranks == 1
    assert measured_step("2.5") == (2.5, "", 0)
    assert measured_step(3) == (3.0, "", 0)
    for bad in ("nope", True):
        with pytest.raises(PlanError, match="measured step"):
            measured_step(bad)  # type: ignore[arg-type]


def test_a_run_of_another_size_is_refused(blind: Prediction, a100: Cluster) -> None:
    # one rank's trace of a 16-rank job anchors only a 16-GPU configuration
    trace = KINETO / "hta_a100_rank0_of16" / "rank0.json.gz"
    eight = predict_model(load_model(SMALL_GATED), a100, nodes=1, tp=8, global_batch=8)
    with pytest.raises(PlanError, match=r"ran on 16 ranks and .* on 8 GPUs: anchor on the"):
        anchor(eight, trace)
    assert blind.strategy.gpus == 16
    a = anchor(blind, trace)  # the same size: taken, and said where from
    assert a.measured_from.startswith(f"the median step of {trace}")
    assert a.system_doc(DGX_A100)["anchored_on"]["measured_from"] == a.measured_from
    res = CliRunner().invoke(
        cli, [*PREDICT, "--measured-step", str(KINETO / "hta_a100_rank0_of16")]
    )
    assert res.exit_code == 1 and "ran on 16 ranks" in res.output
