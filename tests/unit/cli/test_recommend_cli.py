"""`stallscope recommend`: the answer, the JSON file, the plot, and the exit codes and messages
of bad input, on a saved profile of a 2-rank CPU run."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from stallscope.cli.main import cli
from stallscope.predict import Profile

# A 2-rank gloo DDP step on CPU threads: 33 ms of compute, two gradient buckets.
_PROFILE = {
    "format": "stallscope.predict.profile",
    "version": 1,
    "measured": {
        "ranks": 2,
        "nodes": 1,
        "ranks_per_node": 2,
        "backend": "gloo",
        "device": "cpu",
        "step_ns": 41e6,
        "stalls_ns": {},
    },
    "phases": [
        {"phase": "forward", "compute_ns": 10e6},
        {"phase": "backward", "compute_ns": 20e6},
        {"phase": "optimizer", "compute_ns": 3e6},
    ],
    "buckets": [
        {"index": 0, "bytes": 4 << 20, "ready_ns": 12e6, "measured_ns": 4e6},
        {"index": 1, "bytes": 1 << 20, "ready_ns": 20e6, "measured_ns": 1e6},
    ],
    "data_ns": 2e6,
    "host_ns": 1e6,
}


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "job.profile.json"
    Profile.from_dict(_PROFILE).save(path)
    return path


def _run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["recommend", *map(str, args)])


def _ok(*args: str | Path) -> Result:
    res = _run(*args)
    assert res.exit_code == 0, res.output
    return res


BASE = ("--steps", "1000000", "--measured-device", "T4")


def test_the_answer_its_reason_and_the_json(profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "rec.json"
    res = _ok(profile, *BASE, "--time-budget", "6h", "--json", out)
    assert "the cheapest configuration that finishes 1,000,000 steps within 6 h" in res.output
    assert "Pareto front" in res.output and "What the figures rest on:" in res.output
    assert "g5.xlarge" in res.output  # left out, with its reason
    doc = orjson.loads(out.read_bytes())
    assert set(doc) >= {"best", "pareto", "candidates", "why", "notes", "excluded"}
    first = doc["candidates"][0]
    for key in ("cloud", "instance", "count", "hours", "cost", "step_ns", "market"):
        assert key in first
    assert doc["best"] == first and doc["best"]["hours"] <= 6
    assert doc["why"].split(":")[0] in res.output
    assert {r["config"] for r in doc["pareto"]} <= {c["config"] for c in doc["candidates"]}


def test_json_to_stdout_is_json_alone(profile: Path) -> None:
    res = CliRunner().invoke(
        cli, ["recommend", str(profile), *BASE, "--cost-budget", "50", "--json", "-"]
    )
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.stdout)
    assert doc["best"]["cost"] <= 50


def test_plot(profile: Path, tmp_path: Path) -> None:
    svg = tmp_path / "front.svg"
    _ok(profile, *BASE, "--time-budget", "6h", "--plot", svg)
    text = svg.read_text()
    assert text.startswith("<?xml") and "Pareto front" in text and "recommended:" in text
    res = _run(profile, *BASE, "--time-budget", "6h", "--plot", tmp_path / "front.pdf")
    assert res.exit_code == 1 and "a plot is written as .svg or .png" in res.output


def test_spot_and_mix_run(profile: Path) -> None:
    res = _ok(profile, *BASE, "--time-budget", "3h", "--spot", "--mix", "--top", "3")
    assert "spot" in res.output and "mixes: " in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--steps", "100", "--time-budget", "6h"), "measured on CPU threads"),
        ((*BASE, "--time-budget", "1s"), "no configuration finishes 1,000,000 steps within 1 s"),
        ((*BASE, "--time-budget", "-3h"), "is not a duration"),
        ((*BASE, "--time-budget", "0"), "a time budget must be more than 0 hours"),
        ((*BASE, "--cost-budget", "-10"), r"a cost budget must be more than $0"),
        ((*BASE, "--cost-budget", "0.0001"), "A cost budget of $"),
        ((*BASE,), "give exactly one budget"),
        (("--time-budget", "6h", "--measured-device", "T4"), "exactly one of steps, samples"),
        ((*BASE, "--time-budget", "6h", "--gpu", "X100"), "unknown GPU 'X100'"),
        (("--steps", "9", "--time-budget", "6h", "--measured-device", "Z80"), "unknown GPU 'Z80'"),
        ((*BASE, "--time-budget", "6h", "--samples", "5"), "exactly one of steps, samples"),
        ((*BASE, "--time-budget", "6h", "--restart", "soon", "--spot"), "restart time 'soon'"),
    ],
)
def test_bad_input_exits_1_with_the_problem(
    profile: Path, args: tuple[str, ...], message: str
) -> None:
    res = _run(profile, *args)
    assert res.exit_code == 1, res.output
    assert message in res.output
    assert "Traceback" not in res.output


def test_a_malformed_catalog_names_row_and_column(profile: Path, tmp_path: Path) -> None:
    from stallscope.recommend import shipped_catalog_path

    lines = shipped_catalog_path().read_text().splitlines()
    cells = lines[2].split(",")
    cells[10] = "free"  # price_per_hour
    lines[2] = ",".join(cells)
    bad = tmp_path / "cat.csv"
    bad.write_text("\n".join(lines[:4]) + "\n")
    res = _run(profile, *BASE, "--time-budget", "6h", "--catalog", bad)
    assert res.exit_code == 1
    assert f"{bad}, row 2, column price_per_hour: 'free' is not a number" in res.output


def test_kineto_traces_of_one_gpu(tmp_path: Path) -> None:
    # A real one-rank H200 trace (tests/data/kineto): its compute moves to other GPUs by the
    # device model; with no collectives measured, only one-GPU configurations are priced.
    traces = Path(__file__).resolve().parents[2] / "data" / "kineto" / "h200_transformer_1rank"
    out = tmp_path / "rec.json"
    res = _ok(traces, "--steps", "100000", "--time-budget", "24h", "--json", out)
    assert "measured on H200-SXM" in res.output
    doc = orjson.loads(out.read_bytes())
    assert {c["ranks"] for c in doc["candidates"]} == {1}
    assert any("communication on several GPUs is unknown" in e["reason"] for e in doc["excluded"])


def test_a_gpu_the_device_table_cannot_scale_to(tmp_path: Path) -> None:
    """A GPU run's compute cannot move to a GPU with no sourced peak and no measured matmul
    rate (the 96 GB H100): the reason names recommend's own option, and that option prices
    it. The A10G, without a published peak, moves by its measured rates."""
    traces = Path(__file__).resolve().parents[2] / "data" / "kineto" / "h200_transformer_1rank"
    catalog = tmp_path / "catalog.csv"
    header = (
        "cloud,region,instance,gpu,gpus,gpu_memory_gb,vcpus,memory_gb,intra_node_GBps,"
        "network_gbps,price_per_hour,spot_price_per_hour,source,date\n"
    )
    rows = (
        "lab,here,teton.1x,H100-96GB-HBM2e,1,96,24,256,450,400,5,,https://example.org,2026-11-01\n"
        "lab,here,g5ish.1x,A10G,1,24,4,16,16,25,1.0,,https://example.org,2026-11-01\n"
    )
    catalog.write_text(header + rows)
    args = (traces, "--steps", "100000", "--time-budget", "240h", "--catalog", catalog)
    out = tmp_path / "rec.json"
    _ok(*args, "--json", out)
    doc = orjson.loads(out.read_bytes())
    reasons = [e["reason"] for e in doc["excluded"]]
    gpu = "H100-96GB-HBM2e"
    assert any(f"stallscope recommend --compute-scale {gpu}=RATIO" in r for r in reasons)
    assert not any("stallscope predict" in r or "Target." in r for r in reasons)
    assert any(c["gpu"] == "A10G" for c in doc["candidates"])
    res = _ok(*args, "--compute-scale", f"{gpu}=0.8", "--json", out)
    doc = orjson.loads(out.read_bytes())
    assert any(c["gpu"] == gpu for c in doc["candidates"]), res.output
    bad = _run(*args, "--compute-scale", gpu)
    assert bad.exit_code == 2 and "GPU=RATIO" in bad.output
