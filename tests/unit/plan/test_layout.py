"""Rank placement (Megatron's tp-cp-dp-pp order) and the link tier each group's collectives use."""

from __future__ import annotations

import pytest

from stallscope.comm import hierarchical_seconds, predict_seconds
from stallscope.plan import Cluster
from stallscope.plan._comm import collective_s, p2p_s
from stallscope.plan._layout import Placement, layout


def test_megatron_order_places_tp_then_cp_then_dp_then_pp() -> None:
    lay = layout(tp=8, pp=4, dp=16, gpus_per_node=8)
    assert (lay.tp.size, lay.tp.nodes) == (8, 1)  # a node's 8 GPUs
    assert (lay.dp.size, lay.dp.nodes, lay.dp.per_node) == (16, 16, 1)  # one per node
    assert lay.pp_cross_node
    small = layout(tp=2, pp=2, dp=2, gpus_per_node=8)
    assert (small.dp.nodes, small.dp.per_node) == (1, 2) and not small.pp_cross_node
    cp = layout(tp=2, pp=1, dp=8, gpus_per_node=8, cp=2)
    assert (cp.cp.size, cp.cp.nodes) == (2, 1)
    assert (cp.dp.size, cp.dp.nodes, cp.dp.per_node) == (16, 4, 4)  # dp x cp replicas


def test_collectives_use_the_tier_of_their_group(a100: Cluster) -> None:
    n = 64e6
    intra = (a100.nvlink_hop_s, 1 / a100.intra_bytes_s)
    inter = (a100.network_hop_s, 1 / a100.inter_bytes_s_per_gpu)
    base = a100.base_latency_s
    assert collective_s(a100, "all_reduce", n, Placement(8, 1)) == pytest.approx(
        base + predict_seconds("all_reduce", n, 8, *intra)
    )
    assert collective_s(a100, "all_gather", n, Placement(16, 16)) == pytest.approx(
        base + predict_seconds("all_gather", n, 16, *inter)
    )
    assert collective_s(a100, "reduce_scatter", n, Placement(32, 4)) == pytest.approx(
        base + hierarchical_seconds("reduce_scatter", n, 4, 8, intra, inter)
    )
    assert collective_s(a100, "all_reduce", n, Placement(1, 1)) == 0.0
    # the NIC of a node is shared by its GPUs: 1600 Gb/s x 0.79 / 8 per GPU
    assert a100.inter_bytes_s_per_gpu == pytest.approx(1600e9 / 8 * 0.79 / 8)
    assert p2p_s(a100, n, True) > p2p_s(a100, n, False) > 0


def test_nvlink_sharp_speeds_up_all_reduce_alone() -> None:
    from stallscope.plan import load_system

    h100, a100 = load_system("dgx-h100"), load_system("dgx-a100")
    assert (h100.intra_node_fraction, h100.intra_node_copy_fraction) == (0.98, 0.82)
    assert a100.intra_node_fraction == a100.intra_node_copy_fraction == 0.77
    n, node = 1 << 30, Placement(8, 1)
    for coll, busbw in (("all_reduce", 441e9), ("all_gather", 369e9), ("reduce_scatter", 369e9)):
        want = predict_seconds(coll, n, 8, h100.nvlink_hop_s, 1 / busbw)
        assert collective_s(h100, coll, n, node) == pytest.approx(h100.base_latency_s + want)
    assert p2p_s(h100, n, False) == pytest.approx(
        h100.base_latency_s + h100.nvlink_hop_s + n / 369e9
    )
    doc = {"gpu": "H100-SXM", "gpus_per_node": 8, "intra_node_GBps": 450, "inter_node_Gbps": 3200}
    given = load_system(doc | {"intra_node_fraction": 0.9})  # one figure for every collective
    assert given.intra_node_copy_fraction == 0.9
    both = load_system(doc | {"intra_node_fraction": 0.9, "intra_node_copy_fraction": 0.7})
    assert both.intra_node_copy_fraction == 0.7
