"""bench/predict_nvlink.py's core on a few rows of XLA's sm_90 collective table, and the data
file's shape: every op at every size of the generator's sweep, each with its source."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from stallscope.plan import load_system
from stallscope.plan._comm import collective_s
from stallscope.plan._layout import Placement

BENCH = Path(__file__).resolve().parents[3] / "bench"
SCRIPT = BENCH / "predict_nvlink.py"
DATA = BENCH / "data" / "xla_sm90_collectives.json"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("predict_nvlink", SCRIPT)
    assert spec and spec.loader
    mod: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules["predict_nvlink"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench() -> Any:
    return _module()


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return dict(json.loads(DATA.read_text()))


def test_sizes_follow_the_generator(bench: Any) -> None:
    # all-reduce and all-gather store the full buffer, reduce-scatter one rank's 1/8 of it
    assert bench.tensor_bytes("all-reduce", 256) == 1024
    assert bench.tensor_bytes("all-gather", 256) == 1024
    assert bench.tensor_bytes("reduce-scatter", 32) == 1024
    with pytest.raises(ValueError, match="unknown opcode 'all-to-all'"):
        bench.tensor_bytes("all-to-all", 256)
    with pytest.raises(ValueError, match="must be > 0"):
        bench.tensor_bytes("all-reduce", 0)


def test_bands(bench: Any) -> None:
    mib = 2**20
    assert [bench.band_of(n) for n in (1024, mib - 1, mib, 64 * mib - 1, 64 * mib, 2**31)] == [
        "below_1MiB",
        "below_1MiB",
        "1MiB_to_64MiB",
        "1MiB_to_64MiB",
        "from_64MiB",
        "from_64MiB",
    ]


def test_a_few_rows_predicted_with_the_planner(bench: Any) -> None:
    rows = [
        {"op": "all-reduce", "elements": 256, "throughput_Bps": 20_765_736},
        {"op": "all-reduce", "elements": 536_870_912, "throughput_Bps": 229_968_237_690},
        {"op": "all-gather", "elements": 4_194_304, "throughput_Bps": 314_227_150_134},
        {"op": "reduce-scatter", "elements": 67_108_864, "throughput_Bps": 376_090_719_201},
    ]
    system = load_system("dgx-h100")
    res = bench.run({"rows": rows}, system)
    got = res["rows"]
    assert got["bytes"].to_list() == [1024, 2**31, 2**24, 2**31]
    assert got["band"].to_list() == ["below_1MiB", "from_64MiB", "1MiB_to_64MiB", "from_64MiB"]
    for r, src in zip(got.iter_rows(named=True), rows, strict=True):
        assert r["measured_s"] == pytest.approx(r["bytes"] / src["throughput_Bps"])
        want = collective_s(system, r["op"], float(r["bytes"]), Placement(8, 1))
        assert r["predicted_s"] == pytest.approx(want)
        assert r["error_pct"] == pytest.approx(100 * (want / r["measured_s"] - 1))
    # 2 GiB all-reduce in 9.34 ms: 2 x 7/8 x 2 GiB / 9.34 ms = 402 GB/s on the bus
    big = got.row(1, named=True)
    assert big["measured_busbw_GBps"] == pytest.approx(1.75 * 229.968, rel=1e-4)
    by_band = res["by_band"]
    assert by_band.height == 4 and by_band["rows"].sum() == 4


def test_limits_take_the_slope_of_the_two_largest_sizes(bench: Any) -> None:
    # a fixed 30 us plus 2 bytes per ns on the bus: the slope gives the bandwidth back
    busbw = 200e9
    rows = []
    for op, per_rank in (("all-reduce", 1), ("all-gather", 1), ("reduce-scatter", 8)):
        for elements in (2**26 // per_rank, 2**27 // per_rank, 2**28 // per_rank):
            n = bench.tensor_bytes(op, elements)
            t = 30e-6 + bench.bus_factor(bench.OPS[op], 8) * n / busbw
            rows.append({"op": op, "elements": elements, "throughput_Bps": n / t})
    lim = bench.run({"rows": rows}, load_system("dgx-h100"))["limits"]
    assert lim["measured_busbw_large_GBps"].to_list() == pytest.approx([200.0] * 3, rel=1e-6)
    # the model's own slope is its NVLink bus bandwidth on a DGX H100: all-reduce 0.98 of 450
    # GB/s (NVLink SHARP), all-gather and reduce-scatter 0.82
    assert lim["model_busbw_large_GBps"].to_list() == pytest.approx([441.0, 369.0, 369.0], rel=1e-6)


def test_bad_rows_are_named(bench: Any) -> None:
    system = load_system("dgx-h100")
    with pytest.raises(ValueError, match="row 0 lacks throughput_Bps"):
        bench.run({"rows": [{"op": "all-reduce", "elements": 256}]}, system)
    with pytest.raises(ValueError, match="row 0: throughput must be > 0"):
        bench.run({"rows": [{"op": "all-reduce", "elements": 256, "throughput_Bps": 0}]}, system)


def test_data_file_holds_every_op_at_every_size(bench: Any, doc: dict[str, Any]) -> None:
    src = doc["source"]
    assert src["url"].startswith("https://github.com/openxla/xla/blob/")
    assert len(src["url"].split("/")[6]) == 40  # a commit, not a branch
    assert src["date"] == "2025-06-05"
    assert doc["measured_on"] and doc["fields"]["throughput_Bps"]
    sizes: dict[str, list[int]] = {}
    for r in doc["rows"]:
        sizes.setdefault(r["op"], []).append(bench.tensor_bytes(r["op"], r["elements"]))
    want = [2**k for k in range(10, 32)]  # the generator's default sweep: 1 KiB to 2 GiB, x2
    assert sizes == {op: want for op in ("all-reduce", "all-gather", "reduce-scatter")}
    table = bench.measured(doc["rows"])
    assert table.height == 66
    # the largest bus bandwidth is the 2 GiB all-reduce's, of the order of NVLink 4's rate
    pred = bench.predict(table, load_system("dgx-h100"))
    top = pred.row(int(pred["measured_busbw_GBps"].arg_max() or 0), named=True)
    assert (top["op"], top["bytes"]) == ("all_reduce", 2**31)
    assert 300 < top["measured_busbw_GBps"] < 500
