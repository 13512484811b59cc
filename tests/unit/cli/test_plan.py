"""`stallscope plan`, `whatif` and `predict --model`: exit codes, tables and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
from stallscope.plan import STALL_COLUMNS

SYSTEM = {
    "name": "dgx-a100-test",
    "gpu": "A100-80GB",
    "gpus_per_node": 8,
    "intra_node_GBps": 300,
    "inter_node_Gbps": 1600,
    "peak_tflops": {"bf16": 312},
    "hbm_GBps": 2039,
    "hbm_GB": 80,
}
MODEL = {"layers": 8, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000, "name": "m"}


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    m, s = tmp_path / "m.json", tmp_path / "s.json"
    m.write_text(json.dumps(MODEL))
    s.write_text(json.dumps(SYSTEM))
    return str(m), str(s)


def test_plan_prints_a_ranked_table_and_writes_json(files: tuple[str, str], tmp_path: Path) -> None:
    m, s = files
    out = tmp_path / "plan.json"
    res = CliRunner().invoke(
        cli, ["plan", "--model", m, "--system", s, "--gpus", "16", "--top", "3", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "top 3 of" in res.output and "searched in" in res.output
    doc = orjson.loads(out.read_bytes())
    confs = doc["configurations"]
    assert len(confs) == 3 and confs[0]["step_ns"] <= confs[1]["step_ns"] <= confs[2]["step_ns"]
    assert doc["fitting"] <= doc["enumerated"]
    res = CliRunner().invoke(
        cli, ["plan", "--model", m, "--system", s, "--gpus", "8", "--precision", "fp8"]
    )
    assert res.exit_code == 1 and "no fp8 peak" in res.output  # the test system gives bf16 only


def test_predict_model_mode_json(files: tuple[str, str]) -> None:
    m, s = files
    args = ["predict", "--model", m, "--system", s, "--nodes", "2", "--tp", "2", "--pp", "2"]
    res = CliRunner().invoke(cli, [*args, "--global-batch", "32", "--zero", "1", "--json", "-"])
    assert res.exit_code == 0, res.output
    p = orjson.loads(res.stdout)["predictions"][0]
    assert p["dp"] == 4 and p["zero"] == 1
    assert sum(p[c] for c in STALL_COLUMNS) == p["step_ns"] > 0
    assert p["tokens_per_s"] > 0 and p["memory_bytes"] > 0
    text = CliRunner().invoke(cli, [*args, "--global-batch", "32"])
    assert text.exit_code == 0 and "MFU" in text.output and "memory per GPU" in text.output


def test_predict_model_mode_uneven_stages(files: tuple[str, str]) -> None:
    m, s = files  # 8 layers on 4 stages: 1 + 3 + 3 + 1
    args = ["predict", "--model", m, "--system", s, "--nodes", "1", "--tp", "2", "--pp", "4"]
    args += ["--global-batch", "32", "--json", "-"]
    even = orjson.loads(CliRunner().invoke(cli, args).stdout)["predictions"][0]
    res = CliRunner().invoke(cli, [*args, "--first-stage-layers", "1", "--last-stage-layers", "1"])
    assert res.exit_code == 0, res.output
    p = orjson.loads(res.stdout)["predictions"][0]
    assert p["first_stage_layers"] == 1 and p["last_stage_layers"] == 1
    assert even["first_stage_layers"] is None
    # the logits (2 x 32000 x 1024 FLOPs a token; a layer 1024 x (24 x 1024 + 4 x 1024): 2.2
    # layers' worth) make the even split's last stage the slowest; one layer there and on the
    # first stage balances the pipeline
    assert p["step_ns"] < even["step_ns"]
    assert p["stages"][0]["compute_ns"] < p["stages"][1]["compute_ns"]
    text = CliRunner().invoke(
        cli, [*args[:-2], "--first-stage-layers", "1", "--last-stage-layers", "1"]
    )
    assert text.exit_code == 0 and ".first1.last1" in text.output


def test_predict_model_mode_pipeline_layout(files: tuple[str, str], tmp_path: Path) -> None:
    m, s = files  # 1 + 3 + 3 + 1 layers written as a layout: the first / last counts' step
    args = ["predict", "--model", m, "--system", s, "--nodes", "1", "--tp", "2", "--pp", "4"]
    args += ["--global-batch", "32", "--json", "-"]
    res = CliRunner().invoke(cli, [*args, "--pipeline-layout", "Et|(t*3|)*2tL"])
    assert res.exit_code == 0, res.output
    p = orjson.loads(res.stdout)["predictions"][0]
    counts = ["--first-stage-layers", "1", "--last-stage-layers", "1"]
    same = orjson.loads(CliRunner().invoke(cli, [*args, *counts]).stdout)["predictions"][0]
    assert p["pipeline_layout"] == "Et|(t*3|)*2tL" and p["step_ns"] == same["step_ns"]
    bad = CliRunner().invoke(cli, [*args[:-2], "--pipeline-layout", "Et|t*3|t*3|tL|"])
    assert bad.exit_code == 1 and "5 chunks do not split over pp=4" in bad.output
    assert "Traceback" not in bad.output
    run = CliRunner().invoke(cli, ["predict", str(tmp_path), "--pipeline-layout", "Et|tL"])
    assert run.exit_code == 2 and "--pipeline-layout is an option of the model mode" in run.output


def test_predict_model_mode_embedding_and_loss_as_layers(files: tuple[str, str]) -> None:
    m, s = files  # 8 layers + the embedding + the loss = 10 on 5 stages: 1 + 2 + 2 + 2 + 1
    args = ["predict", "--model", m, "--system", s, "--nodes", "1", "--gpus-per-node", "5"]
    args += ["--pp", "5", "--global-batch", "20", "--embedding-as-layer", "--loss-as-layer"]
    res = CliRunner().invoke(cli, [*args, "--json", "-"])
    assert res.exit_code == 0, res.output
    p = orjson.loads(res.stdout)["predictions"][0]
    assert p["embedding_as_layer"] is True and p["loss_as_layer"] is True
    comp = [st["compute_ns"] for st in p["stages"]]
    assert comp[0] < comp[1] == comp[2] == comp[3]
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0 and ".emb-layer.loss-layer" in text.output
    even = CliRunner().invoke(cli, args[:-2])  # 8 layers do not split over 5 stages
    assert even.exit_code == 1 and "not divisible by pp x interleave" in even.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tp", "3"], "tp=3 does not divide heads (16)"),
        (
            ["--pp", "4", "--embedding-as-layer"],
            "the 9 layers do not split evenly over the 4 pipeline stages",
        ),
        (
            ["--pp", "2", "--embedding-as-layer", "--loss-as-layer", "--first-stage-layers", "4"],
            "exclude each other",
        ),
        (
            ["--pp", "4", "--first-stage-layers", "2", "--last-stage-layers", "1"],
            "5 layers left do not split evenly over the 2 middle stages",
        ),
        (
            ["--pp", "4", "--interleave", "2", "--first-stage-layers", "1"],
            "divide by the interleave",
        ),
        (["--pp", "3"], "nearest valid pp: 1, 2, 4"),
        (["--global-batch", "30"], "nearest valid global batches"),
        (["--interleave", "3", "--pp", "2"], "not divisible by pp x interleave"),
    ],
)
def test_predict_bad_configurations_exit_1_with_the_fix(
    files: tuple[str, str], args: list[str], message: str
) -> None:
    m, s = files
    base = ["predict", "--model", m, "--system", s, "--nodes", "1", "--global-batch", "32"]
    res = CliRunner().invoke(cli, [*base, *args])
    assert res.exit_code == 1
    assert message in res.output and "Traceback" not in res.output


def test_unknown_gpu_and_missing_options(files: tuple[str, str], tmp_path: Path) -> None:
    m, _ = files
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"gpu": "Q-9000", "gpus_per_node": 8, "intra_node_GBps": 1, "inter_node_Gbps": 1}
        )
    )
    res = CliRunner().invoke(cli, ["plan", "--model", m, "--system", str(bad), "--gpus", "8"])
    assert res.exit_code == 1 and "Q-9000" in res.output
    res = CliRunner().invoke(cli, ["predict", "--model", m])
    assert res.exit_code == 2 and "needs --system, --nodes, --global-batch" in res.output


def test_whatif_table_json_and_plot(files: tuple[str, str], tmp_path: Path) -> None:
    m, s = files
    args = [
        "whatif",
        "--model",
        m,
        "--system",
        s,
        "--gpus",
        "16",
        "--global-batch",
        "32",
        "--knob",
        "nic=0.5,1",
    ]
    res = CliRunner().invoke(cli, [*args, "--json", "-"])
    assert res.exit_code == 0, res.output
    rows = orjson.loads(res.stdout)["rows"]
    assert [(r["knob"], r["factor"]) for r in rows] == [("nic", 0.5), ("nic", 1.0)]
    assert rows[1]["speedup"] == 1.0 and rows[0]["speedup"] <= 1.0
    res = CliRunner().invoke(cli, [*args, "--knob", "nvlnk=2"])
    assert res.exit_code == 1 and "nearest" in res.output
    pytest.importorskip("matplotlib", reason="the what-if plot needs matplotlib")
    res = CliRunner().invoke(cli, [*args, "--plot", str(tmp_path / "w.png")])
    assert res.exit_code == 0 and (tmp_path / "w.png").stat().st_size > 1000


def test_predict_takes_a_run_or_a_model_not_both(files: tuple[str, str], tmp_path: Path) -> None:
    m, s = files
    base = ["predict", "--model", m, "--system", s, "--global-batch", "32"]
    res = CliRunner().invoke(cli, [*base, "--nodes", "2,4"])
    assert res.exit_code == 2 and "one node count" in res.output
    res = CliRunner().invoke(cli, ["predict", str(tmp_path), *base[1:], "--nodes", "1"])
    assert res.exit_code == 2 and "not both" in res.output
    res = CliRunner().invoke(cli, ["predict"])
    assert res.exit_code == 2 and "or --model and --system" in res.output


def test_stack_by_name_by_file_and_its_errors(files: tuple[str, str], tmp_path: Path) -> None:
    m, s = files
    base = ["predict", "--model", m, "--system", s, "--nodes", "2", "--global-batch", "32"]
    runs = {}
    for stack in ("megatron-core", "megatron-lm-2021"):
        res = CliRunner().invoke(cli, [*base, "--stack", stack, "--json", "-"])
        assert res.exit_code == 0, res.output
        runs[stack] = orjson.loads(res.output)["predictions"][0]
    assert runs["megatron-lm-2021"]["stack"] == "megatron-lm-2021"
    # the 2021 DDP reduces the gradients after the backward: a longer step
    assert runs["megatron-lm-2021"]["step_ns"] > runs["megatron-core"]["step_ns"]
    f = tmp_path / "stack.json"
    f.write_text(
        json.dumps({"preset": "megatron-core", "dp_overlap": False, "attention": "unfused"})
    )
    res = CliRunner().invoke(cli, [*base, "--stack", str(f), "--json", "-"])
    assert res.exit_code == 0, res.output
    assert (
        orjson.loads(res.output)["predictions"][0]["step_ns"] == runs["megatron-lm-2021"]["step_ns"]
    )
    res = CliRunner().invoke(cli, [*base, "--stack", "nemo"])
    assert res.exit_code == 2 and "no software stack 'nemo'" in res.output
    f.write_text(json.dumps({"dp_overlapp": False}))
    res = CliRunner().invoke(cli, [*base, "--stack", str(f)])
    assert res.exit_code == 1 and "unknown stack keys 'dp_overlapp'" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(
        cli, ["plan", "--model", m, "--system", s, "--gpus", "16", "--stack", "nemo-24"]
    )
    assert res.exit_code == 0, res.output


def test_seq_len_sets_the_trained_sequence(files: tuple[str, str]) -> None:
    m, s = files
    base = ["plan", "--model", m, "--system", s, "--gpus", "16", "--top", "1", "--json", "-"]
    short = orjson.loads(CliRunner().invoke(cli, base).output)
    long = orjson.loads(CliRunner().invoke(cli, [*base, "--seq-len", "4096"]).output)
    assert long["model"]["seq_len"] == 4096 != short["model"]["seq_len"]
    args = ["predict", "--model", m, "--system", s, "--nodes", "2", "--global-batch", "32"]
    steps = []
    for extra in ([], ["--seq-len", "4096"]):
        res = CliRunner().invoke(cli, [*args, *extra, "--json", "-"])
        assert res.exit_code == 0, res.output
        steps.append(orjson.loads(res.output)["predictions"][0]["step_ns"])
    assert steps[1] > 2.5 * steps[0]  # 4x the tokens per step (the optimizer's step stays)
    res = CliRunner().invoke(cli, [*args, "--seq-len", "0"])
    assert res.exit_code == 2 and "--seq-len" in res.output


def test_model_options_with_a_measured_run_are_refused(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["predict", str(tmp_path), "--tp", "8", "--seq-len", "8"])
    assert res.exit_code == 2
    assert "--tp, --seq-len are options of the model mode" in res.output


def test_plan_tries_the_embedding_and_loss_as_layers(tmp_path: Path) -> None:
    m, s = tmp_path / "m.json", tmp_path / "s.json"  # 6 layers + 2 = 8 stages of 1
    m.write_text(json.dumps(MODEL | {"layers": 6}))
    s.write_text(json.dumps(SYSTEM))
    args = ["plan", "--model", str(m), "--system", str(s), "--gpus", "8", "--top", "1000"]
    args += ["--global-batch", "16"]
    res = CliRunner().invoke(cli, [*args, "--json", "-"])
    assert res.exit_code == 0, res.output
    confs = orjson.loads(res.stdout)["configurations"]
    assert {c["pp"] for c in confs if c["embedding_as_layer"]} >= {4, 8}
    assert all(c["loss_as_layer"] == c["embedding_as_layer"] for c in confs)
    even = CliRunner().invoke(cli, [*args, "--pipeline-split", "even", "--json", "-"])
    assert {c["pp"] for c in orjson.loads(even.stdout)["configurations"]} <= {1, 2}
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0 and "embedding+loss" in text.output and "split" in text.output
    bad = CliRunner().invoke(cli, [*args, "--pipeline-split", "even,middle"])
    assert bad.exit_code == 2 and "middle: choose among even, embedding, loss" in bad.output
    what = [
        "whatif",
        *args[1:7],
        "--global-batch",
        "16",
        "--knob",
        "nic=1",
        "--pipeline-split",
        "even",
        "--json",
        "-",
    ]
    rows = orjson.loads(CliRunner().invoke(cli, what).stdout)["rows"]
    assert rows and "emb-layer" not in rows[0]["config"]


def test_plan_searches_the_context_parallel_sizes_given(files: tuple[str, str]) -> None:
    m, s = files
    args = ["plan", "--model", m, "--system", s, "--gpus", "16", "--global-batch", "16"]
    res = CliRunner().invoke(cli, [*args, "--cp", "2", "--top", "3", "--json", "-"])
    assert res.exit_code == 0, res.output
    confs = orjson.loads(res.stdout)["configurations"]
    assert confs and all(c["cp"] == 2 for c in confs)
    text = CliRunner().invoke(cli, [*args, "--cp", "1,2", "--top", "50"])
    assert text.exit_code == 0, text.output
    header = next(line for line in text.output.splitlines() if line.lstrip().startswith("rank"))
    assert " cp " in header  # shown: some of the 50 rows run cp 2
    plain = CliRunner().invoke(cli, [*args, "--top", "3", "--json", "-"])
    assert all(c["cp"] == 1 for c in orjson.loads(plain.stdout)["configurations"])
    for bad in ("0", "2,x", ""):
        res = CliRunner().invoke(cli, [*args, "--cp", bad])
        assert res.exit_code == 2 and "context-parallel sizes >= 1" in res.output


def test_moe_dispatcher_option_offers_every_dispatcher_the_planner_times() -> None:
    from stallscope.cli.plan import MOE_DISPATCHER_CHOICES
    from stallscope.plan._stack import MOE_DISPATCHERS

    assert MOE_DISPATCHER_CHOICES == MOE_DISPATCHERS


#: Llama 3 8B on one DGX B200, the precision and recipe tests' base (base[4] is the system).
B200_8B = ["predict", "--model", "llama3-8b", "--system", "dgx-b200", "--nodes", "1"]
B200_8B += ["--seq-len", "8192", "--global-batch", "64", "--zero", "1"]


def test_fp8_recipe_replaces_the_stacks_own() -> None:
    from stallscope.cli.plan import FP8_RECIPE_CHOICES
    from stallscope.plan._stack import FP8_RECIPES

    assert FP8_RECIPE_CHOICES == FP8_RECIPES  # the option offers every recipe the planner times
    base = [*B200_8B, "--precision", "fp8"]
    steps = {}
    for recipe in ("current", "mxfp8"):
        res = CliRunner().invoke(cli, [*base, "--stack", "nemo-25", "--fp8-recipe", recipe])
        assert res.exit_code == 0, res.output
        res = CliRunner().invoke(
            cli, [*base, "--stack", "nemo-25", "--fp8-recipe", recipe, "--json", "-"]
        )
        p = orjson.loads(res.output)["predictions"][0]
        assert p["stack"] == f"nemo-25+{recipe}"
        steps[recipe] = p["step_ns"]
    assert steps["mxfp8"] > steps["current"]  # block-scaled kernels, more than the casts save
    res = CliRunner().invoke(cli, [*base[:4], "dgx-h100", *base[5:], "--fp8-recipe", "mxfp8"])
    assert res.exit_code == 1 and "'mxfp8' needs block-scaled FP8 tensor cores" in res.output
    plan = ["plan", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "8"]
    res = CliRunner().invoke(cli, [*plan, "--fp8-recipe", "current"])
    assert res.exit_code == 2 and "applies to --precision fp8, not bf16" in res.output
    assert "Traceback" not in res.output


def test_cli_offers_nvfp4_and_keeps_fp8_recipes_to_fp8() -> None:
    from stallscope.cli.plan import PRECISION_CHOICES
    from stallscope.plan._strategy import PRECISIONS

    assert PRECISION_CHOICES == PRECISIONS  # the option offers every precision the planner times
    base = [*B200_8B, "--stack", "nemo-25"]
    steps = {}
    for prec in ("fp8", "nvfp4"):
        res = CliRunner().invoke(cli, [*base, "--precision", prec])
        assert res.exit_code == 0, res.output
        steps[prec] = float(res.output.split("step ")[1].split(" s")[0])
    assert steps["nvfp4"] < steps["fp8"]
    res = CliRunner().invoke(cli, [*base, "--precision", "nvfp4", "--fp8-recipe", "mxfp8"])
    assert res.exit_code == 2 and "applies to --precision fp8, not nvfp4" in res.output
    h100 = ["predict", "--model", "llama3-8b", "--system", "dgx-h100", "--nodes", "1"]
    res = CliRunner().invoke(cli, [*h100, "--global-batch", "64", "--precision", "nvfp4"])
    assert res.exit_code != 0 and "a Blackwell system" in res.output


def test_predict_model_mode_prints_one_layer_and_with_parts_each_part(
    files: tuple[str, str],
) -> None:
    m, s = files
    args = ["predict", "--model", m, "--system", s, "--nodes", "2", "--tp", "2", "--pp", "2"]
    args += ["--global-batch", "16"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "one layer, one micro-batch, ms: forward" in res.output
    assert "gemm_fc1" not in res.output  # the tables only with --parts
    res = CliRunner().invoke(cli, [*args, "--parts"])
    assert res.exit_code == 0, res.output
    for word in ("gemm_fc1", "communication", "bubble", "optimizer", "forward", "backward"):
        assert word in res.output
    # --parts is the model mode's: a measured run refuses it by name
    res = CliRunner().invoke(cli, ["predict", "some-run", "--parts"])
    assert res.exit_code == 2 and "--parts" in res.output
