"""The bandwidth formulas and cost models against hand-computed values (nccl-tests factors)."""

from __future__ import annotations

import math

import pytest

from stallscope.comm import _formulas as f


@pytest.mark.parametrize(
    ("collective", "p", "factor"),
    [
        ("all_reduce", 1, 0.0),
        ("all_reduce", 2, 1.0),  # 2(p-1)/p
        ("all_reduce", 4, 1.5),
        ("all_reduce", 8, 1.75),
        ("all_gather", 2, 0.5),  # (p-1)/p
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 4, 0.75),
        ("broadcast", 2, 1.0),  # 1
        ("broadcast", 8, 1.0),
        ("send_recv", 2, 1.0),
        ("reduce", 4, 1.0),
    ],
)
def test_bus_factor_matches_nccl_tests(collective: str, p: int, factor: float) -> None:
    assert f.bus_factor(collective, p) == pytest.approx(factor)


def test_algbw_and_busbw_hand_computed() -> None:
    # 1 GiB all-reduce in 10 ms on 8 ranks: algbw 107.374 GB/s, busbw x 1.75 = 187.9 GB/s.
    n = 1 << 30
    assert f.algbw(n, 0.010) == pytest.approx(107.3741824e9)
    assert f.busbw("all_reduce", n, 0.010, 8) == pytest.approx(107.3741824e9 * 1.75)
    # 64 MB all-gather (total output) on 4 ranks in 20 ms: 3.2 GB/s alg, 2.4 GB/s bus.
    assert f.busbw("all_gather", 64e6, 0.020, 4) == pytest.approx(2.4e9)
    # send/recv: busbw == algbw.
    assert f.busbw("send_recv", 1e6, 1e-3, 2) == pytest.approx(1e9)


def test_every_benchmarked_collective_has_a_factor_and_a_model() -> None:
    for c in f.COLLECTIVES:
        assert f.bus_factor(c, 4) > 0
        assert f.cost_terms(c, 4).bandwidth_terms > 0


def test_bandwidth_optimal_models_use_the_bus_factor() -> None:
    # For the default algorithms the n*beta coefficient is the nccl-tests bus factor, so a fitted
    # 1/beta is a bus bandwidth.
    for c in f.COLLECTIVES:
        for p in (2, 3, 8):
            assert f.cost_terms(c, p).bandwidth_terms == pytest.approx(f.bus_factor(c, p))


def test_ring_all_reduce_time_hand_computed() -> None:
    # p=4, n=100 MB, alpha=10 us, beta=1/10 GB/s, gamma=1/50 GB/s:
    # 2*3*10us + 2*3/4*100e6/10e9 + 3/4*100e6/50e9 = 60us + 15 ms + 1.5 ms
    t = f.predict_seconds("all_reduce", 100e6, 4, 10e-6, 1e-10, 2e-11)
    assert t == pytest.approx(60e-6 + 0.015 + 0.0015)


def test_alternative_algorithms_hand_computed() -> None:
    a, b = 1e-5, 1e-9
    # Rabenseifner p=8: 2*3 alpha + 2*7/8 n beta
    assert f.predict_seconds("all_reduce", 1e6, 8, a, b, algorithm="rabenseifner") == pytest.approx(
        6 * a + 1.75e-3
    )
    # recursive doubling p=8: 3(alpha + n beta)
    assert f.predict_seconds(
        "all_reduce", 1e6, 8, a, b, algorithm="recursive_doubling"
    ) == pytest.approx(3 * (a + 1e-3))
    # binomial broadcast p=4: 2(alpha + n beta); scatter+allgather: (2+3) alpha + 2*3/4 n beta
    assert f.predict_seconds("broadcast", 1e6, 4, a, b, algorithm="binomial") == pytest.approx(
        2 * (a + 1e-3)
    )
    assert f.predict_seconds(
        "broadcast", 1e6, 4, a, b, algorithm="scatter_allgather"
    ) == pytest.approx(5 * a + 1.5e-3)
    # ring all-gather / pairwise all-to-all p=4: 3 alpha + 3/4 n beta; send/recv: alpha + n beta
    assert f.predict_seconds("all_gather", 1e6, 4, a, b) == pytest.approx(3 * a + 0.75e-3)
    assert f.predict_seconds("all_to_all", 1e6, 4, a, b) == pytest.approx(3 * a + 0.75e-3)
    assert f.predict_seconds("send_recv", 1e6, 2, a, b) == pytest.approx(a + 1e-3)


def test_one_rank_costs_nothing() -> None:
    assert f.predict_seconds("all_reduce", 1e9, 1, 1.0, 1.0) == 0.0


def test_hierarchical_all_reduce_hand_computed() -> None:
    # 2 nodes x 4 ranks, n = 80 MB; intra 100 GB/s, inter 10 GB/s, no latency:
    # intra RS + AG: 2 * 3/4 * 80e6 / 100e9 = 1.2 ms; inter AR of n/4 on 2 nodes: 20e6 / 10e9 = 2 ms
    t = f.hierarchical_all_reduce_seconds(80e6, 2, 4, (0.0, 1e-11), (0.0, 1e-10))
    assert t == pytest.approx(1.2e-3 + 2e-3)
    assert f.hierarchical_all_reduce_seconds(80e6, 1, 1, (1.0, 1.0), (1.0, 1.0)) == 0.0


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="unknown collective 'allreduce'"):
        f.bus_factor("allreduce", 2)
    with pytest.raises(ValueError, match="group size"):
        f.bus_factor("all_reduce", 0)
    with pytest.raises(ValueError, match="time must be > 0"):
        f.algbw(1, 0.0)
    with pytest.raises(ValueError, match="not modelled for all_gather"):
        f.cost_terms("all_gather", 4, "tree")
    assert math.isfinite(f.bus_factor("all_to_all", 1))


def test_hierarchical_gather_and_scatter() -> None:
    from stallscope.comm import hierarchical_seconds, predict_seconds

    intra, inter = (1e-6, 1 / 200e9), (5e-6, 1 / 25e9)
    n = 1 << 30
    for coll in ("all_gather", "reduce_scatter"):
        # one tier only: the flat ring of that tier
        assert hierarchical_seconds(coll, n, 1, 8, intra, inter) == predict_seconds(
            coll, n, 8, *intra
        )
        assert hierarchical_seconds(coll, n, 4, 1, intra, inter) == predict_seconds(
            coll, n, 4, *inter
        )
        # 4 nodes x 8: the node tier moves n / 8 among 4 nodes
        two = hierarchical_seconds(coll, n, 4, 8, intra, inter)
        assert two == pytest.approx(
            7 * intra[0] + 7 / 8 * n * intra[1] + 3 * inter[0] + 3 / 4 * n / 8 * inter[1]
        )
    assert hierarchical_seconds("all_reduce", n, 4, 8, intra, inter) == pytest.approx(
        f.hierarchical_all_reduce_seconds(n, 4, 8, intra, inter)
    )
    with pytest.raises(ValueError, match="no two-tier model"):
        hierarchical_seconds("broadcast", n, 4, 8, intra, inter)
