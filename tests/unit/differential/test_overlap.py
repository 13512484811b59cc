"""The bucketed-overlap formula: known answers."""

from __future__ import annotations

import pytest

from stallscope.differential import allreduce_s, exposed_comm_ns
from stallscope.exceptions import AnalyzeError

GBIT = 1e9


def test_allreduce_of_two_ranks_sends_the_buffer_once() -> None:
    # ring all-reduce, p = 2: 2(p-1)/p n beta = n beta; beta = 8 / rate
    assert allreduce_s(1e6, 2, 1, GBIT, 0.0) == pytest.approx(8e6 / GBIT)
    assert allreduce_s(1e6, 4, 1, GBIT, 0.0) == pytest.approx(1.5 * 8e6 / GBIT)
    # 2 nodes x 2: the node tier carries n / 2 (the intra tier is free)
    assert allreduce_s(1e6, 2, 2, GBIT, 0.0) == pytest.approx(0.5 * 8e6 / GBIT)


def test_one_bucket_is_fully_exposed_and_early_ones_hide() -> None:
    t = 8e6 / GBIT * 1e9  # ns of 1 MB at 1 Gbit/s: 8 ms
    assert exposed_comm_ns(100e6, [1_000_000], nodes=2, ranks_per_node=1, rate_bps=GBIT) == (
        pytest.approx(t)
    )
    # two equal buckets: the first is ready half way through a 100 ms backward and done long
    # before the end; only the last one shows
    two = exposed_comm_ns(100e6, [1_000_000, 1_000_000], nodes=2, ranks_per_node=1, rate_bps=GBIT)
    assert two == pytest.approx(t)
    # a short backward: the first bucket is still running when the second is ready
    short = exposed_comm_ns(4e6, [1_000_000, 1_000_000], nodes=2, ranks_per_node=1, rate_bps=GBIT)
    assert short == pytest.approx(14e6)  # F0 = 2 + 8 ms; F1 = max(10, 4) + 8 = 18; minus 4
    assert exposed_comm_ns(5e6, [10], nodes=1, ranks_per_node=1, rate_bps=GBIT) == 0.0
    assert exposed_comm_ns(5e6, [], nodes=2, ranks_per_node=1, rate_bps=GBIT) == 0.0


def test_bad_input() -> None:
    with pytest.raises(AnalyzeError, match="rate > 0"):
        exposed_comm_ns(1.0, [1], nodes=2, ranks_per_node=1, rate_bps=0)
