"""The differential method for real, small: a tiny MLP, 2 ranks, two link rates on the test bed,
a few steps, data loaded in the training process (no workers, so that its whole cost is on the
step's path). What must hold, within the noise of a shared 2-core machine:

- T(synthetic) <= T(cached) <= T(cold), each within 10 % (the repeat-to-repeat spread of
  compute-bound step times on such a machine is 5-7 %);
- the network stall grows as the link slows: at 200 Mbit/s it exceeds the one at 1 Gbit/s by
  at least half the extra transfer time of the gradients' all-reduce;
- the data stall agrees with the trace's: T(cold) - T(synthetic) against the trace's data wait
  plus the communication wait it causes at the all-reduce (the peer's wait for data), within
  25 % of the differential figure plus 2 ms.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stallscope.differential import Entry, Settings, analyze
from tests.unit.testbed.conftest import _netns_reason

pytestmark = [pytest.mark.netns, pytest.mark.root, pytest.mark.torch, pytest.mark.slow]


def test_small_matrix(tmp_path: Path) -> None:
    reason = _netns_reason()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("PIL", reason="the workload's images need Pillow (the data extra)")
    from stallscope.workloads._models import gradient_bytes, mlp

    argv = (sys.executable, "-m", "stallscope.workloads._train", "--depth", "1", "--width",
            "64", "--batch-size", "128", "--workers", "0", "--images", "4096", "--data",
            str(tmp_path / "img"))  # fmt: skip
    settings = Settings(nodes=2, ranks_per_node=1, rates=("1gbit", "200mbit"), steps=16,
                        warmup=2, cold="fadvise", guard=False, timeout_s=240)  # fmt: skip
    res = analyze(Entry(argv), tmp_path / "out", settings)
    t = {r["run"]: r["step_ns"] for r in res.runs.iter_rows(named=True)}
    assert list(t) == ["one", "synthetic", "cached", "cold", "network@1gbit", "network@200mbit"]
    assert t["synthetic"] <= 1.1 * t["cached"], t
    assert t["cached"] <= 1.1 * t["cold"], t
    assert res.cache["cold"]["method"] == "fadvise" and res.cache["cached"]["method"] == "read"

    s = {
        r["stall"] if r["rate"] is None else r["rate"]: r for r in res.stalls.iter_rows(named=True)
    }
    extra_s = gradient_bytes(mlp(1, 64)) * 8 * (1 / 200e6 - 1 / 1e9)  # all-reduce of 2: n bytes
    assert s["200mbit"]["ns_per_step"] - s["1gbit"]["ns_per_step"] >= 0.5 * extra_s * 1e9, s

    data = s["data"]
    trace = data["trace_ns_per_step"] + data["trace_comm_ns_per_step"]
    assert abs(trace - data["ns_per_step"]) <= 0.25 * data["ns_per_step"] + 2e6, data


def test_sweep_of_one_model_with_the_predictor_and_the_formula(tmp_path: Path) -> None:
    """One small MLP (3.2 MB of gradients) on 1 device, 2 in one node and 2 nodes at 200
    Mbit/s: the communication stall is at least half the all-reduce's transfer time at the rate
    (126 ms), and the trace's, the predictor's and the formula's views are within a factor of 2
    of it."""
    reason = _netns_reason()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("PIL", reason="the workload's images need Pillow (the data extra)")
    from stallscope.differential import ModelPoint, sweep_comm
    from stallscope.workloads._models import gradient_bytes, layer_count, mlp

    m = mlp(1, 256)
    argv = (sys.executable, "-m", "stallscope.workloads._train", "--depth", "1", "--width",
            "256", "--batch-size", "16", "--workers", "0", "--images", "512", "--data",
            str(tmp_path / "img"))  # fmt: skip
    point = ModelPoint("tiny", argv, layer_count(m), gradient_bytes(m))
    df = sweep_comm([point], tmp_path / "sweep", rates=["200mbit"], steps=6, warmup=2)
    (row,) = df.to_dicts()
    assert (row["layers"], row["gradient_bytes"], row["rate_bps"]) == (2, gradient_bytes(m), 2e8)
    transfer_ns = gradient_bytes(m) * 8 / 200e6 * 1e9
    assert row["comm_stall_ns"] >= 0.5 * transfer_ns, row
    assert row["buckets"] and sum(row["buckets"]) >= 0.9 * gradient_bytes(m)
    assert row["backward_ns"] > 0 and row["step_pair_ns"] > 0
    for view in ("predicted_ns", "formula_ns", "trace_comm_ns"):
        assert 0.5 * row["comm_stall_ns"] <= row[view] <= 2 * row["comm_stall_ns"], (view, row)
