"""A PyTorch profiler trace as the planner's efficiency table: fake Kineto records (operators with
shapes, launches, kernels, copies) timed by a known rate, the rows they give, the GPU they
calibrate, the command-line flag, and the errors for traces that cannot calibrate."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
from stallscope.plan import PlanError, load_system
from stallscope.plan._trace_table import read_trace, table_from_trace

DATA = Path(__file__).parents[2] / "data" / "kineto"
H100 = load_system("dgx-h100").device
FRACTION, FIXED_S = 0.6, 6e-6  # the GEMMs' rate in the fake trace
COPY_GBPS = 2500.0
SHAPES = [(8192, 8192, 8192), (16384, 4096, 4096), (4096, 14336, 4096), (8192, 1024, 4096)]


class Trace:
    """Kineto events on one CPU thread and one stream, times in µs."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 0.0
        self.corr = 0

    def op(self, name: str, dims: list[Any], types: list[str], kernel_us: float,
           concrete: list[str] | None = None, kernel: str = "gemm_kernel") -> None:  # fmt: skip
        """An operator that launches one kernel of ``kernel_us``."""
        self.corr += 1
        args: dict[str, Any] = {"Input Dims": dims, "Input type": types, "External id": self.corr}
        if concrete is not None:
            args["Concrete Inputs"] = concrete
        self.events.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1,
             "ts": self.t, "dur": 30.0, "args": {"External id": self.corr}}
        )  # fmt: skip
        self.events.append(
            {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": self.t + 1,
             "dur": 20.0, "args": args}
        )  # fmt: skip
        self.events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": self.t + 5, "dur": 3.0, "args": {"correlation": self.corr}}
        )  # fmt: skip
        self.events.append(
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": self.t + 9,
             "dur": kernel_us, "args": {"correlation": self.corr, "stream": 7}}
        )  # fmt: skip
        self.t += 100.0 + kernel_us

    def doc(self) -> dict[str, Any]:
        return {"traceEvents": self.events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}]}


def gemm_us(m: int, n: int, k: int) -> float:
    return (2.0 * m * n * k / (H100.peak("bf16") * FRACTION * H100.waves(m, n)) + FIXED_S) * 1e6


def fake_trace() -> dict[str, Any]:
    tr = Trace()
    bf16 = ["c10::BFloat16", "c10::BFloat16"]
    for m, n, k in SHAPES:
        for _ in range(3):  # forward-style mm and addmm calls of each shape
            tr.op("aten::mm", [[m, k], [k, n]], bf16, gemm_us(m, n, k))
            tr.op("aten::addmm", [[n], [m, k], [k, n], [], []], ["c10::BFloat16", *bf16, "", ""],
                  gemm_us(m, n, k))  # fmt: skip
    tr.op("aten::mm", [[64, 64], [64, 64]], ["float", "float"], 3.0)  # fp32: left out
    q = [2, 32, 8192, 128]
    causal = 4.0 * 2 * 32 * 8192**2 * 128 / 2
    tr.op("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []],
          ["c10::BFloat16"] * 3, causal / 500e12 * 1e6, ["", "", "", "0.", "True", "False", ""],
          kernel="flash_fwd_kernel")  # fmt: skip
    tr.op("aten::_scaled_dot_product_flash_attention_backward", [q, q, q, q, q, [2, 32, 8192]],
          ["c10::BFloat16"] * 6, 2.5 * causal / 400e12 * 1e6, kernel="flash_bwd_kernel")  # fmt: skip
    n = 1 << 30
    tr.events.append(
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0,
         "tid": 7, "ts": tr.t, "dur": 2 * n / (COPY_GBPS * 1e9) * 1e6, "args": {"bytes": n}}
    )  # fmt: skip
    tr.events.append(  # a kernel no operator launched (a CUDA graph's)
        {"ph": "X", "cat": "kernel", "name": "graphed", "pid": 0, "tid": 7, "ts": tr.t + 900,
         "dur": 5.0, "args": {"correlation": 10_000}}
    )  # fmt: skip
    return tr.doc()


def test_the_trace_gives_the_measured_tables_rows() -> None:
    t = table_from_trace(fake_trace(), "fake")
    assert t["device"] == "NVIDIA H100"
    assert len(t["gemm"]) == len(SHAPES)  # mm and addmm of one shape are one row
    for r in t["gemm"]:
        m, n, k = r["m"], r["n"], r["k"]
        assert (m, n, k) in SHAPES and r["dtype"] == "bf16" and r["calls"] == 6
        assert r["tflops"] == pytest.approx(2.0 * m * n * k / gemm_us(m, n, k) / 1e6)
    (a,) = t["attention"]
    assert (a["batch"], a["heads"], a["seq"], a["head_dim"], a["causal"]) == (
        2,
        32,
        8192,
        128,
        True,
    )
    assert a["fwd_tflops"] == pytest.approx(500) and a["bwd_tflops"] == pytest.approx(400)
    assert t["attention_kernel"] == "flash2" and "assumed_causal" in t  # the backward's mask
    (c,) = t["memory"]
    assert c["GBps"] == pytest.approx(COPY_GBPS)
    assert t["left_out"] == {
        "GEMMs without 16-bit or FP8 operands and shapes": 1,
        "kernels outside these operators (CUDA graphs, other operators)": 1,
    }


def test_the_trace_calibrates_the_gpu(tmp_path: Path) -> None:
    path = tmp_path / "rank0.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(fake_trace()).encode()))
    dev = load_system("dgx-h100", efficiency_table=path).device
    assert dev.fraction("bf16") == pytest.approx(FRACTION, rel=1e-6)
    assert dev.gemm_fixed_s == pytest.approx(FIXED_S, rel=1e-4)
    assert dev.hbm_fraction == pytest.approx(COPY_GBPS / H100.hbm_GBps)
    assert dev.attention_measured == "flash2" and dev.attention_curves
    assert "4 measured GEMMs of " in dev.basis["matmul"] and "rank0.pt.trace" in dev.basis["matmul"]
    # a bf16 trace leaves fp8 at its MAMF ratio to the fitted bf16
    assert "its MAMF ratio to bf16 on the fitted bf16" in dev.basis["matmul"]
    assert dev.fraction("fp8") != load_system("dgx-h100").device.fraction("fp8")
    plain = tmp_path / "rank0.json"  # a plain JSON trace, and a system file naming it
    plain.write_text(json.dumps(fake_trace()))
    system = {"gpu": "H100-SXM", "gpus_per_node": 8, "intra_node_GBps": 450,
              "inter_node_Gbps": 3200, "efficiency_table": str(plain)}  # fmt: skip
    assert load_system(system).device.fraction("bf16") == pytest.approx(FRACTION, rel=1e-6)


def test_traces_that_cannot_calibrate_say_why(tmp_path: Path) -> None:
    real = DATA / "h200_transformer_1rank" / "h200_transformer_rank0.pt.trace.json.gz"
    with pytest.raises(PlanError, match=r"no operator shapes: record it with .*record_shapes=True"):
        load_system("dgx-h200", efficiency_table=real)
    tr = Trace()
    tr.op("aten::mm", [[64, 64], [64, 64]], ["float", "float"], 3.0)
    with pytest.raises(PlanError, match="1 GEMMs without 16-bit or FP8 operands"):
        table_from_trace(tr.doc(), "fp32")
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(PlanError, match=r"broken\.json\.gz is not readable JSON"):
        read_trace(bad)
    with pytest.raises(PlanError, match="not a built Cluster"):
        load_system(load_system("dgx-h100"), efficiency_table=real)


def test_the_commands_take_the_trace(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(fake_trace()))
    small = ["--model", "llama3-8b", "--seq-len", "8192", "--system", "dgx-h100"]
    args = ["predict", *small, "--nodes", "1", "--global-batch", "8", "--json", "-"]
    plain = CliRunner().invoke(cli, args)
    calibrated = CliRunner().invoke(cli, [*args, "--efficiency-table", str(path)])
    assert plain.exit_code == 0 and calibrated.exit_code == 0, calibrated.output
    step = [json.loads(r.output)["predictions"][0]["step_ns"] for r in (plain, calibrated)]
    assert step[1] != step[0]
    r = CliRunner().invoke(
        cli, ["plan", *small, "--gpus", "8", "--global-batch", "8", "--efficiency-table", str(path)]
    )
    assert r.exit_code == 0 and "tokens/s" in r.output, r.output
    assert "GPU timed by trace.json: least squares over 4 measured GEMMs" in r.output
    r = CliRunner().invoke(cli, [*args[:-2], "--efficiency-table", str(path)])  # text, not JSON
    assert r.exit_code == 0 and "GPU timed by trace.json" in r.output, r.output
    r = CliRunner().invoke(
        cli, ["whatif", *small, "--gpus", "8", "--global-batch", "8", "--knob", "nic=1,2",
              "--efficiency-table", str(path)],
    )  # fmt: skip
    assert r.exit_code == 0 and "GPU timed by trace.json" in r.output, r.output
    r = CliRunner().invoke(cli, ["plan", *small, "--gpus", "8", "--efficiency-table", "nope.json"])
    assert r.exit_code == 2 and "nope.json" in r.output


def test_a_real_trace_links_its_gemms_to_their_kernels() -> None:
    """An A100 trace of an fp32 model (HolisticTraceAnalysis' test data): each of its 25 GEMM
    calls is found around its kernels' launches, and left out for its fp32 operands; its
    device-to-device copies give copy rows."""
    doc = read_trace(DATA / "hta_a100_rank0_of16" / "rank0.json.gz")
    t = table_from_trace(doc, "rank0.json.gz")
    assert t["gemm"] == [] and t["attention"] == []
    assert t["left_out"]["GEMMs without 16-bit or FP8 operands and shapes"] == 25
    assert len(t["memory"]) > 100 and all(r["GBps"] > 0 for r in t["memory"])


def test_a_folder_of_rank_traces_is_one_table(tmp_path: Path) -> None:
    ranks = tmp_path / "traces"
    ranks.mkdir()
    for r in range(2):
        (ranks / f"rank{r}.pt.trace.json.gz").write_bytes(
            gzip.compress(json.dumps(fake_trace()).encode())
        )
    (ranks / "notes.txt").write_text("not a trace")
    dev = load_system("dgx-h100", efficiency_table=ranks).device
    assert dev.fraction("bf16") == pytest.approx(FRACTION, rel=1e-6)
    assert "GEMMs of " in dev.basis["matmul"] and "/traces (bf16" in dev.basis["matmul"]
    from stallscope.plan._trace_table import read_traces

    assert {r["calls"] for r in read_traces(ranks)["gemm"]} == {12}  # 6 calls on each rank
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PlanError, match=r"empty holds no profiler trace \(\*\.json"):
        load_system("dgx-h100", efficiency_table=empty)
