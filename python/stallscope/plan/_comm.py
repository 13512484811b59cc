"""Communication times of the planner on a system's two link tiers, from the shared collective
cost models (``stallscope.comm``): NVLink / NVSwitch inside a node, the NICs across nodes with
the node's NIC bandwidth shared by all its GPUs (they communicate at the same time in a
symmetric job), a group spanning both tiers as the hierarchical algorithm."""

from __future__ import annotations

from stallscope.comm import hierarchical_seconds, predict_seconds
from stallscope.plan._cluster import Cluster
from stallscope.plan._layout import Placement


def collective_s(system: Cluster, collective: str, nbytes: float, group: Placement) -> float:
    """Seconds of one all_reduce / all_gather / reduce_scatter of ``nbytes`` (nccl-tests'
    convention) over ``group``: NCCL's base latency plus the alpha-beta model per tier."""
    if group.size <= 1 or nbytes <= 0:
        return 0.0
    # NVLink SHARP reduces inside the switch: all-reduce alone runs at its own rate
    rate = system.intra_bytes_s if collective == "all_reduce" else system.intra_copy_bytes_s
    intra = (system.nvlink_hop_s, 1.0 / rate)
    inter = (system.network_hop_s, 1.0 / system.inter_bytes_s_per_gpu)
    if group.nodes == 1:
        t = predict_seconds(collective, nbytes, group.size, *intra)
    elif group.per_node == 1:
        t = predict_seconds(collective, nbytes, group.size, *inter)
    else:
        t = hierarchical_seconds(collective, nbytes, group.nodes, group.per_node, intra, inter)
    return system.base_latency_s + t


def all_to_all_s(system: Cluster, nbytes: float, group: Placement) -> float:
    """Seconds of one all-to-all of ``nbytes`` per rank (nccl-tests' convention: each rank
    sends nbytes / size to every rank) over ``group``: the peers inside the node over NVLink
    and those on other nodes over the node's NICs at once, the slower tier setting the time."""
    if group.size <= 1 or nbytes <= 0:
        return 0.0
    chunk = nbytes / group.size
    return tiered_s(
        system, group, (group.per_node - 1) * chunk, (group.size - group.per_node) * chunk
    )


def tiered_s(system: Cluster, group: Placement, intra_bytes: float, inter_bytes: float) -> float:
    """Seconds of a rank's exchange with every peer of ``group``: ``intra_bytes`` to the peers
    on its node over NVLink and ``inter_bytes`` to those on other nodes over the node's NICs,
    both at once, the slower tier setting the time (a hop's latency per peer on NVLink, per
    node on the network)."""
    if group.size <= 1 or intra_bytes + inter_bytes <= 0:
        return 0.0
    local = group.per_node - 1  # peers on this rank's node
    intra = local * system.nvlink_hop_s + intra_bytes / system.intra_copy_bytes_s if local else 0.0
    inter = 0.0
    if group.nodes > 1:
        inter = (group.nodes - 1) * system.network_hop_s
        inter += inter_bytes / system.inter_bytes_s_per_gpu
    return system.base_latency_s + max(intra, inter)


def p2p_s(system: Cluster, nbytes: float, cross_node: bool) -> float:
    """Seconds of one point-to-point send of ``nbytes`` between pipeline neighbours."""
    if nbytes <= 0:
        return 0.0
    if cross_node:
        return system.base_latency_s + system.network_hop_s + nbytes / system.inter_bytes_s_per_gpu
    return system.base_latency_s + system.nvlink_hop_s + nbytes / system.intra_copy_bytes_s
