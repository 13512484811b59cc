"""`stallscope predict`: exit codes, the sweep, the table, --json and -o."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from tests.unit.predict.runs import CpuRun

from stallscope.analysis import STALL_COLUMNS
from stallscope.cli.main import cli
from stallscope.predict import profile_of


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return profile_of(CpuRun().frame()).save(tmp_path_factory.mktemp("p") / "run.profile.json")


def test_sweep_prints_every_combination_and_writes_json(profile_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "pred.json"
    res = CliRunner().invoke(
        cli,
        [
            "predict",
            str(profile_file),
            "--nodes",
            "1,2",
            "--ranks-per-node",
            "1,2",
            "--rate",
            "1gbit,50mbit",
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "measured: 1 x 2" in res.stdout
    assert "2 x 2, 50 Mbit/s" in res.stdout and "1 x 1, 1 Gbit/s" in res.stdout
    assert "across nodes: 935.6 Mbit/s" in res.stdout  # the built-in figure it used: the rate
    doc = orjson.loads(out.read_bytes())
    assert doc["measured"]["ranks"] == 2 and doc["measured"]["step_ns"] == 42_000_000
    preds = doc["predictions"]
    assert len(preds) == 8
    assert {(p["nodes"], p["ranks_per_node"], p["rate_bps"]) for p in preds} == {
        (n, g, r) for n in (1, 2) for g in (1, 2) for r in (1e9, 50e6)
    }
    for p in preds:
        assert sum(p[c] for c in STALL_COLUMNS) == pytest.approx(p["step_ns"], abs=2)
    slow = next(
        p for p in preds if p["nodes"] == 2 and p["rate_bps"] == 50e6 and p["ranks_per_node"] == 1
    )
    fast = next(
        p for p in preds if p["nodes"] == 2 and p["rate_bps"] == 1e9 and p["ranks_per_node"] == 1
    )
    assert slow["network_ns"] > 10 * fast["network_ns"] / 2


def test_without_flags_the_measured_configuration(profile_file: Path) -> None:
    res = CliRunner().invoke(cli, ["predict", str(profile_file)])
    assert res.exit_code == 0, res.output
    assert "1 x 2, as calibrated" in res.stdout


def test_save_profile(profile_file: Path, tmp_path: Path) -> None:
    from stallscope.predict import Profile

    out = tmp_path / "again.json"
    res = CliRunner().invoke(cli, ["predict", str(profile_file), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert Profile.load(out).measured == Profile.load(profile_file).measured


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--nodes", "0"], 2, "must be >= 1"),
        (["--nodes", "two"], 2, "whole numbers"),
        (["--rate", "fast"], 2, "is not a tc rate"),
        (["--nodes", "2"], 1, "--rate"),  # no inter-node figure
        (["--nodes", "2", "--rate", "1gbit", "--strategy", "zero"], 2, "zero"),
        (["--device", "H100"], 1, "measured ratio"),
    ],
)
def test_bad_input_exit_codes(profile_file: Path, args: list[str], code: int, message: str) -> None:
    res = CliRunner().invoke(cli, ["predict", str(profile_file), *args])
    assert res.exit_code == code
    assert message in res.output
    assert "Traceback" not in res.output


def test_a_run_that_is_not_there(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["predict", str(tmp_path / "nothing")])
    assert res.exit_code == 1
    assert "no such file or directory" in res.output


def test_network_and_device_options(profile_file: Path) -> None:
    res = CliRunner().invoke(
        cli, ["predict", str(profile_file), "--nodes", "2", "--network", "ethernet-10g,ib-ndr"]
    )
    assert res.exit_code == 0, res.output
    assert "2 x 2, ethernet-10g" in res.stdout and "2 x 2, ib-ndr" in res.stdout
    assert "link table: ib-ndr" in res.stdout
    h200 = Path(__file__).resolve().parents[2] / "data" / "kineto" / "h200_transformer_1rank"
    res = CliRunner().invoke(cli, ["predict", str(h200), "--device", "A100-SXM4-80GB"])
    assert res.exit_code == 0, res.output
    assert "1 x 1, as calibrated, A100-SXM4-80GB" in res.stdout
    res = CliRunner().invoke(cli, ["predict", str(h200), "--device", "H1OO"])
    assert res.exit_code == 1 and "nearest: H100-SXM" in res.output


def test_a_device_without_figures_names_predicts_option() -> None:
    h200 = Path(__file__).resolve().parents[2] / "data" / "kineto" / "h200_transformer_1rank"
    gpu = "H100-96GB-HBM2e"  # no published peak, no measured matmul rate
    res = CliRunner().invoke(cli, ["predict", str(h200), "--device", gpu])
    assert res.exit_code == 1
    assert f"{gpu} has no sourced peak" in res.output and "(--compute-scale RATIO)" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(cli, ["predict", str(h200), "--device", gpu, "--compute-scale", "2.5"])
    assert res.exit_code == 0, res.output
    # the A10G has no published peak but measured rates: they carry the profile to it
    res = CliRunner().invoke(cli, ["predict", str(h200), "--device", "A10G"])
    assert res.exit_code == 0, res.output


def test_measured_network_prices_a_multi_node_trace_set() -> None:
    """The A100 16-rank set spans 2 nodes and its collectives carry no sizes: without the
    measured network the error names the option; with it every node count predicts."""
    a100 = Path(__file__).resolve().parents[2] / "data" / "kineto" / "hta_a100_rank0_of16"
    args = ["predict", str(a100), "--nodes", "1,4", "--ranks-per-node", "8"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1 and "--measured-network" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(cli, [*args, "--measured-network", "ib-hdr"])
    assert res.exit_code == 0, res.output
    assert "1 x 8, ib-hdr" in res.stdout and "4 x 8, ib-hdr" in res.stdout
