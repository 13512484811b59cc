"""The communication model against hand-computed formulas: tiers, algorithms, the NIC cap,
calibration files and link rates."""

from __future__ import annotations

import math
from typing import Any

import pytest

from stallscope.comm import Calibration, tcp_efficiency
from stallscope.comm import _formulas as f
from stallscope.predict import PredictError
from stallscope.predict._comm import (
    CommModel,
    Tier,
    calibration_link,
    rate_link,
    tree_correction,
)

MB = 1e6


def _model(backend: str = "gloo", nic: float | None = None) -> CommModel:
    intra = Tier(alpha_s=10e-6, beta_s_per_byte=1 / 10e9, source="intra")
    inter = Tier(alpha_s=50e-6, beta_s_per_byte=1 / 1e9, source="inter")
    return CommModel(backend, intra, inter, nic)


def test_one_node_ring_all_reduce() -> None:
    # 4 ranks, 100 MB: 2*3*10us + 2*3/4*100e6/10e9 = 60 us + 15 ms
    assert _model().seconds("all_reduce", 100 * MB, 1, 4) == pytest.approx(60e-6 + 15e-3)


def test_one_rank_per_node_uses_the_inter_tier() -> None:
    # 4 nodes x 1: 2*3*50us + 1.5*100e6/1e9 = 300 us + 150 ms
    assert _model().seconds("all_reduce", 100 * MB, 4, 1) == pytest.approx(300e-6 + 0.150)


def test_gloo_flat_ring_waits_for_its_slowest_edge() -> None:
    # 2 nodes x 2 ranks: one ring over 4, each step as slow as the inter-node edge
    t = _model("gloo").seconds("all_reduce", 100 * MB, 2, 2)
    assert t == pytest.approx(2 * 3 * 50e-6 + 1.5 * 100e6 / 1e9)


def test_nccl_takes_the_faster_of_ring_and_tree() -> None:
    m = _model("nccl")
    n, nodes, per = 100 * MB, 2, 4
    # one port per rank (no node-wide NIC): the node's rings cross at 4 ports' 4 GB/s
    edge = max(1e-10, 1 / (per * 1e9))
    # of the ring's 14 steps, 2 cross nodes (50 us each), 12 stay inside (10 us each)
    flat = 12 * 10e-6 + 2 * 50e-6 + f.predict_seconds("all_reduce", n, 8, 0.0, edge)
    tree = f.predict_seconds("all_reduce", n, 8, 50e-6, edge, algorithm="tree")
    assert m.seconds("all_reduce", n, nodes, per) == pytest.approx(min(flat, tree))
    assert flat < tree  # large messages: the ring's bandwidth term is smaller
    # 1 kB, latency-bound: the tree's 6 steps all cross nodes (its bandwidth term at NCCL's
    # 0.9, index 3); the ring's 14 steps only 2 of them: the ring wins
    small_tree = 2 * 3 * 50e-6 + 2 * 1e3 * edge / 0.9
    small_ring = 12 * 10e-6 + 2 * 50e-6 + 2 * 7 / 8 * 1e3 * edge
    assert m._options("all_reduce", 1e3, nodes, per) == pytest.approx([small_ring, small_tree])
    assert m.seconds("all_reduce", 1e3, nodes, per) == pytest.approx(small_ring)
    # no hierarchical all-reduce: NCCL runs none without in-network reduction, and it would
    # move a quarter of the bytes across nodes
    hier = f.hierarchical_all_reduce_seconds(n, nodes, per, (10e-6, 1e-10), (50e-6, 1e-9))
    assert hier < m.seconds("all_reduce", n, nodes, per)


def test_nccl_tree_bandwidth_at_mid_sizes_follows_nccls_correction() -> None:
    assert [tree_correction(n) for n in (64, 512 * 2**10, 32 * 2**20, 256 * 2**20)] == [
        0.9,
        0.5,
        0.7,
        0.9,
    ]
    assert tree_correction(512 * 2**20) == 1.0 == tree_correction(8 * 2**30)
    # 8 nodes x 1 rank at 1 GB/s, 4 MiB (index 16: 0.7): the tree beats the ring's 14 steps
    m, n = _model("nccl"), 4 * 2**20
    tree = 2 * 3 * 50e-6 + 2 * n * 1e-9 / 0.7
    ring = 2 * 7 * 50e-6 + 2 * 7 / 8 * n * 1e-9
    assert m.seconds("all_reduce", n, 8, 1) == pytest.approx(min(tree, ring))
    assert m._options("all_reduce", n, 8, 1) == pytest.approx([ring, tree])
    # gloo has no tree, and no correction
    assert _model("gloo").seconds("all_reduce", n, 8, 1) == pytest.approx(ring)


def test_the_nic_is_shared_by_the_ranks_sending_across() -> None:
    # 8 ranks per node, each 1 GB/s to the network: 8 GB/s of ports; a node-wide NIC of
    # 2 GB/s caps the rings that cross it.
    n = 80 * MB
    capped = _model("nccl", nic=2e9).seconds("all_reduce", n, 2, 8)
    ports = _model("nccl").seconds("all_reduce", n, 2, 8)
    lat = 28 * 10e-6 + 2 * 50e-6  # 30 ring steps, 2 across nodes
    assert capped == pytest.approx(lat + f.predict_seconds("all_reduce", n, 16, 0.0, 1 / 2e9))
    assert ports == pytest.approx(lat + f.predict_seconds("all_reduce", n, 16, 0.0, 1 / 8e9))
    assert capped > ports
    assert f.shared_beta(1e-9, 8, 2e9) == pytest.approx(4e-9)
    assert f.shared_beta(1e-9, 1, 2e9) == pytest.approx(1e-9)


def test_tree_terms() -> None:
    t = f.cost_terms("all_reduce", 8, "tree")
    assert (t.latency_terms, t.bandwidth_terms, t.reduce_terms) == (6.0, 2.0, 1.0)
    assert f.cost_terms("all_reduce", 2, "tree") == f.cost_terms("all_reduce", 2, "ring")


def test_one_rank_and_empty_messages_cost_nothing() -> None:
    assert _model().seconds("all_reduce", 100 * MB, 1, 1) == 0.0
    assert _model().seconds("all_reduce", 0, 4, 2) == 0.0


def test_a_missing_tier_is_an_error_naming_the_fix() -> None:
    m = CommModel("gloo", None, None)
    with pytest.raises(PredictError, match="--rate"):
        m.seconds("all_reduce", MB, 2, 1)
    with pytest.raises(PredictError, match="within a node"):
        m.seconds("all_reduce", MB, 1, 2)


def test_tcp_efficiency_hand_computed() -> None:
    # (1500 - 52) / 1514 payload per frame, less one 66-byte ACK per two frames the other way
    assert tcp_efficiency(1500) == pytest.approx(1448 / 1514 * (1 - 66 / 3028))
    assert tcp_efficiency(9000) == pytest.approx(8948 / 9014 * (1 - 66 / 18028))
    assert tcp_efficiency(1500, bidirectional=False) == pytest.approx(1448 / 1514)
    link = rate_link(200e6)
    assert link.bandwidth_bytes_per_s == pytest.approx(200e6 / 8 * tcp_efficiency(1500))
    assert "200 Mbit/s" in link.source


def _calibration(**extra: Any) -> Calibration:
    fits = []
    for coll, tier, a, bw in (
        ("all_reduce", "inter_node", 1e-4, 23e6),
        ("all_gather", "inter_node", 1e-4, 12e6),
        ("all_reduce", "intra_node", 2e-5, 900e6),
    ):
        fits.append(
            {
                "collective": coll,
                "tier": tier,
                "place": "in",
                "group_size": 2,
                "alpha_s": a,
                "beta_s_per_byte": 1 / bw,
                "min_bytes": 65536,
                "max_bytes": 8 << 20,
            }
        )
    doc = {"format": "stallscope.comm.calibration", "version": 1, "backend": "gloo", "fits": fits}
    doc.update(extra)
    return Calibration(doc, "cal.json")


def test_calibration_tiers_keep_each_collectives_fit() -> None:
    cal = _calibration()
    inter = calibration_link(cal, "inter_node")
    assert inter is not None
    assert inter.of("all_reduce") == (1e-4, 1 / 23e6)
    assert inter.of("all_gather") == (1e-4, 1 / 12e6)  # gloo's lock-step all-gather
    assert inter.of("broadcast") == (1e-4, 1 / 23e6)  # no fit: the tier's (all-reduce's)
    assert (inter.min_bytes, inter.max_bytes) == (65536, 8 << 20)
    assert calibration_link(cal, "mixed") is None
    scaled = inter.scaled(4.0, "x")
    assert scaled.of("all_gather")[1] == pytest.approx(4 / 12e6)
    assert math.isclose(scaled.bandwidth_bytes_per_s, 23e6 / 4)
