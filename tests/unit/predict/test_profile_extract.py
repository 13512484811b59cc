"""profile_of on made-up runs with known timings, and on a real 2-rank DDP run of the demo
workload made in the test."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import stallscope.predict as sp
from stallscope.predict._extract import WARMUP_RULE, kept_windows

from .runs import MS, CpuRun


def test_phases_buckets_data_and_host_of_a_cpu_ddp_run() -> None:
    run = CpuRun()
    p = sp.profile_of(run.frame())
    assert {ph.phase: ph.compute_ns for ph in p.phases} == {
        "forward": 10 * MS,
        "backward": 20 * MS,  # the DDP wait is not compute
        "optimizer": 3 * MS,
    }
    assert p.backward_tail_ns == 1 * MS
    assert [(b.index, b.bytes, b.ready_ns) for b in p.buckets] == [
        (0, 1 << 20, 8 * MS),
        (1, 4 << 20, 20 * MS),
    ]
    assert p.gradient_bytes == 5 << 20
    assert p.data_ns == 2 * MS and p.host_ns == 1 * MS
    assert p.collectives == []  # the buckets' own all-reduces are not counted twice
    m = p.measured
    assert (m.ranks, m.nodes, m.ranks_per_node, m.backend, m.device) == (2, 1, 2, "gloo", "cpu")
    assert m.step_ns == 42 * MS
    assert m.stalls_ns["interconnect_ns"] == 5 * MS and m.stalls_ns["compute_ns"] == 34 * MS
    assert p.straggler_factor == 1.0
    assert p.comm_overlap == 0.0  # bucket 0's all-reduce ended with the last one
    # warm-up: the first of 6 steps of each rank is dropped
    assert p.source["steps_used"] == 2 * 5 and p.source["warmup_rule"] == WARMUP_RULE


def test_a_slower_rank_is_the_straggler() -> None:
    p = sp.profile_of(CpuRun(slow={1: 1.5}).frame())
    assert p.straggler_ranks == 1
    assert p.straggler_factor == pytest.approx(1.5)
    assert p.phase("forward").compute_ns == 10 * MS  # the typical rank's
    assert p.measured.stalls_ns["sync_wait_ns"] > 0


def test_kept_windows_rule() -> None:
    w = pl.DataFrame(
        {
            "rank": [0] * 25 + [1] * 2,
            "step": [*range(25), 0, 1],
            "start_ns": list(range(27)),
            "end_ns": list(range(1, 28)),
        }
    )
    k = kept_windows(w, native=True)
    assert k.filter(pl.col("rank") == 0)["step"].to_list() == list(range(2, 24))  # 25 // 10 = 2
    assert k.filter(pl.col("rank") == 1)["step"].to_list() == [0]  # no warm-up under 3 steps
    other = kept_windows(w, native=False)
    assert other.filter(pl.col("rank") == 0).height == 23
    assert other.filter(pl.col("rank") == 1)["step"].to_list() == [0, 1]


def test_profile_json_round_trip(tmp_path: Path) -> None:
    p = sp.profile_of(CpuRun(slow={0: 1.2}).frame())
    path = p.save(tmp_path / "p.json")
    text = path.read_text()
    assert '"format": "stallscope.predict.profile"' in text and '"ready_ns"' in text
    q = sp.Profile.load(path)
    assert q.to_dict() | {"created": ""} == p.to_dict() | {"created": ""}
    assert sp.profile_of(path).measured == p.measured  # a saved profile is a valid run argument


def test_a_run_without_buckets_says_so() -> None:
    run = CpuRun(buckets=[], collectives=False)
    p = sp.profile_of(run.frame())
    assert p.buckets == [] and p.bytes_source == "none"
    assert any("no gradient buckets" in n for n in p.notes)


@pytest.mark.torch
def test_profile_of_a_real_demo_run(demo_run: Path) -> None:
    p = sp.profile_of(demo_run)
    m = p.measured
    assert (m.ranks, m.nodes, m.ranks_per_node, m.backend, m.device) == (2, 1, 2, "gloo", "cpu")
    assert p.source["kind"] == "native"
    assert p.source["steps_used"] == 2 * (8 - 1 - 1)  # warm-up and the closing step dropped
    names = [ph.phase for ph in p.phases]
    assert names[:3] == ["forward", "backward", "optimizer"]
    assert all(ph.compute_ns > 0 for ph in p.phases)
    # DDP's rebuilt buckets: 2 for the demo MLP, the last ones first, all gradients covered
    params = 3 * 32 * 32 * 512 + 512 + 2 * (512 * 512 + 512) + 512 * 10 + 10
    assert p.gradient_bytes == 4 * params
    assert len(p.buckets) >= 2
    readies = [b.ready_ns for b in p.buckets]
    assert readies == sorted(readies)
    assert readies[-1] == pytest.approx(p.phase("backward").compute_ns, rel=0.02)
    assert p.steps.height == p.source["steps_used"]
