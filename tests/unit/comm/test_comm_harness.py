"""Sweep sizes, size parsing, configuration checks, the tier groups of a job's layout, the block
median and the run-queue wait."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from stallscope.comm import SweepConfig, parse_size, sweep_sizes
from stallscope.comm._harness import Layout, runqueue_wait_ns


def test_parse_size_binary_multiples() -> None:
    assert parse_size("4096") == 4096
    assert parse_size("64K") == 65536
    assert parse_size("16m") == 16 << 20
    assert parse_size("1G") == 1 << 30
    assert parse_size("1.5K") == 1536
    for bad in ("", "abc", "-1K", "0"):
        with pytest.raises(ValueError, match="size"):
            parse_size(bad)


def test_sweep_sizes_like_nccl_tests() -> None:
    assert sweep_sizes(1024, 8192, 2) == [1024, 2048, 4096, 8192]
    assert sweep_sizes(65536, 16 << 20, 4) == [65536, 262144, 1 << 20, 4 << 20, 16 << 20]
    assert sweep_sizes(100, 100, 2) == [100]
    assert len(sweep_sizes(1, 1 << 62, 1.01)) == 64  # bounded
    with pytest.raises(ValueError, match="factor must be > 1"):
        sweep_sizes(1, 10, 1.0)
    with pytest.raises(ValueError, match="min_bytes <= max_bytes"):
        sweep_sizes(10, 1, 2)


def test_config_validation_names_the_problem() -> None:
    SweepConfig().validate()
    with pytest.raises(ValueError, match="unknown collective"):
        SweepConfig(collectives=("allreduce",)).validate()
    with pytest.raises(ValueError, match="places"):
        SweepConfig(places=("inplace",)).validate()
    with pytest.raises(ValueError, match="tiers"):
        SweepConfig(tiers=("rack",)).validate()
    with pytest.raises(ValueError, match="backend"):
        SweepConfig(backend="mpi").validate()
    cfg = SweepConfig(collectives=("all_gather", "broadcast"), min_seconds_per_size=0.2)
    assert SweepConfig.from_dict(cfg.to_dict()) == cfg


def test_layout_groups_per_tier() -> None:
    two_by_two = Layout([0, 0, 1, 1])
    g = two_by_two.groups()
    assert g == {"world": [0, 1, 2, 3], "intra_node": [0, 1], "inter_node": [0, 2]}
    assert two_by_two.tier_label([0, 1]) == "intra_node"
    assert two_by_two.tier_label([0, 2]) == "inter_node"
    assert two_by_two.tier_label([0, 1, 2, 3]) == "mixed"
    one_node = Layout([0, 0]).groups()
    assert "inter_node" not in one_node
    assert one_node["intra_node"] == [0, 1]
    one_per_node = Layout([0, 1, 2]).groups()
    assert "intra_node" not in one_per_node
    assert one_per_node["inter_node"] == [0, 1, 2]


def test_block_median_rejects_hiccups_and_absorbs_carry_over() -> None:
    from stallscope.comm._harness import block_median

    # 64 KiB operations: blocks of 16. A hiccup (op delayed 4 ms, the next one faster because the
    # link's tokens piled up) must not move the estimate; the plain median of single operations
    # would be pulled by the fast half of every pair.
    base = [1000] * 160
    for i in range(0, 160, 64):  # 3 of the 10 blocks are hit
        base[i] += 4000
    assert block_median(base, 64 * 1024, 1 << 20) == 1000
    pairs = [1500, 500] * 40  # carry-over: alternate slow/fast, true mean 1000
    assert block_median(pairs, 64 * 1024, 1 << 20) == 1000
    assert block_median([1, 2, 3], 1 << 20, 1 << 20) == 2  # < 3 blocks: the mean
    assert block_median([10, 20, 30, 40], 1 << 21, 1 << 20) == 25  # blocks of 1 op


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or runqueue_wait_ns() is None,
    reason="needs Linux schedstat (/proc/self/task/*/schedstat) and sched_setaffinity",
)
def test_runqueue_wait_counts_time_spent_waiting_for_a_cpu() -> None:
    # This process and a busy child share one CPU for 0.3 s: the scheduler splits it, so this
    # process waits on the run queue for a good part of that time. Alone, it barely waits.
    cpu = min(os.sched_getaffinity(0))
    old = os.sched_getaffinity(0)
    spin = f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nt = time.time()\n"
    spin += "while time.time() - t < 5: pass\n"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.3)  # the child is started and spinning on that CPU
        w0, t0 = runqueue_wait_ns(), time.monotonic()
        while time.monotonic() - t0 < 0.3:
            pass
        w1 = runqueue_wait_ns()
    finally:
        os.sched_setaffinity(0, old)
        child.kill()
        child.wait(timeout=10)
    assert w0 is not None and w1 is not None
    assert w1 - w0 > 50_000_000  # > 50 ms of the 0.3 s spent waiting (expected ~ half)
