"""Bandwidth formulas and alpha-beta cost models of collectives, written once.

The micro-benchmark (``stallscope bench comm``), the calibration fit and the predictor all read
these; nothing else in stallscope may restate them.

Conventions (nccl-tests, doc/PERFORMANCE.md):

* ``nbytes`` is the size nccl-tests reports for a test: the buffer of all-reduce and broadcast; the
  *total* output of all-gather (p chunks); the *total* input of reduce-scatter (p chunks); the whole
  send buffer of all-to-all; the buffer each rank sends in send/recv.
* algbw = nbytes / time, in bytes per second.
* busbw = algbw x bus_factor(collective, p): the bandwidth a link must carry, comparable across
  collectives and rank counts; factors 2(p-1)/p for all-reduce, (p-1)/p for all-gather,
  reduce-scatter and all-to-all, 1 for broadcast, reduce and send/recv.

Cost models (p ranks, n bytes, alpha s, beta s/byte, gamma s/byte of reduction):

* ring all-reduce        2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma
* ring all-gather         (p-1) alpha +  (p-1)/p n beta
* ring reduce-scatter     (p-1) alpha +  (p-1)/p n beta + (p-1)/p n gamma
* pipelined broadcast     (p-1) alpha +          n beta  (chain; NCCL's ring broadcast)
* pairwise all-to-all     (p-1) alpha +  (p-1)/p n beta
* send/recv                    alpha +          n beta

plus the alternatives tree / Rabenseifner / recursive doubling / binomial broadcast. For every
"bandwidth-optimal" algorithm the bandwidth coefficient equals the nccl-tests bus factor, so the
fitted 1/beta is the bus bandwidth the link sustains.

* tree all-reduce (NCCL's double binary tree, reduce and broadcast pipelined):
  2 log2(p) alpha + 2 n beta + n gamma. Each rank is inside one tree and a leaf of the other,
  each tree carries n/2, and both phases stream at once, so a rank's link carries 2n each way
  (NCCL's tuner rates the tree at half its bus bandwidth for the same reason); its latency grows
  with log2(p) instead of p.

Across nodes (N nodes of G ranks): a node's ranks share its NIC, so when k of them send across
at once each gets 1/k of it (`shared_beta`); the hierarchical all-reduce runs G inter-node
all-reduces of n/G at once. TCP over a shaped Ethernet link carries payload at
`tcp_efficiency(mtu)` of the link rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The collectives stallscope benchmarks and models, in display order.
COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "all_to_all",
    "send_recv",
)

#: Algorithms the cost model knows, per collective; the first one is the default.
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "rabenseifner", "recursive_doubling"),
    "all_gather": ("ring",),
    "reduce_scatter": ("ring",),
    "broadcast": ("ring", "binomial", "scatter_allgather"),
    "all_to_all": ("pairwise",),
    "send_recv": ("direct",),
    "reduce": ("ring",),
}


def _check(collective: str, p: int) -> None:
    if collective not in ALGORITHMS:
        raise ValueError(
            f"unknown collective {collective!r}: use one of {', '.join(sorted(ALGORITHMS))}"
        )
    if p < 1:
        raise ValueError(f"group size must be >= 1, got {p}")


def bus_factor(collective: str, p: int) -> float:
    """nccl-tests' busbw / algbw ratio for ``collective`` over ``p`` ranks."""
    _check(collective, p)
    if collective == "all_reduce":
        return 2.0 * (p - 1) / p
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (p - 1) / p
    return 1.0  # broadcast, reduce, send_recv


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth in bytes per second (nbytes as defined in the module docstring)."""
    if seconds <= 0:
        raise ValueError(f"time must be > 0 s, got {seconds}")
    return nbytes / seconds


def busbw(collective: str, nbytes: float, seconds: float, p: int) -> float:
    """Bus bandwidth in bytes per second: algbw x bus_factor."""
    return algbw(nbytes, seconds) * bus_factor(collective, p)


@dataclass(frozen=True)
class CostTerms:
    """time = latency_terms * alpha + bandwidth_terms * n * beta + reduce_terms * n * gamma."""

    latency_terms: float
    bandwidth_terms: float
    reduce_terms: float


def cost_terms(collective: str, p: int, algorithm: str | None = None) -> CostTerms:
    """The coefficients of alpha, n*beta and n*gamma for one collective, group size and algorithm."""
    _check(collective, p)
    algo = algorithm or ALGORITHMS[collective][0]
    if algo not in ALGORITHMS[collective]:
        raise ValueError(
            f"algorithm {algo!r} is not modelled for {collective}: "
            f"use one of {', '.join(ALGORITHMS[collective])}"
        )
    if p == 1:
        return CostTerms(0.0, 0.0, 0.0)
    lg = math.log2(p)
    frac = (p - 1) / p
    if collective == "all_reduce":
        if algo == "ring":
            return CostTerms(2.0 * (p - 1), 2.0 * frac, frac)
        if algo == "tree":
            if p == 2:  # one edge: the ring's
                return CostTerms(2.0, 1.0, 0.5)
            return CostTerms(2.0 * lg, 2.0, 1.0)
        if algo == "rabenseifner":
            return CostTerms(2.0 * lg, 2.0 * frac, frac)
        return CostTerms(lg, lg, lg)  # recursive doubling
    if collective == "all_gather":
        return CostTerms(p - 1.0, frac, 0.0)
    if collective in ("reduce_scatter", "reduce"):
        return CostTerms(p - 1.0, frac if collective == "reduce_scatter" else 1.0, frac)
    if collective == "broadcast":
        if algo == "ring":
            return CostTerms(p - 1.0, 1.0, 0.0)
        if algo == "binomial":
            return CostTerms(lg, lg, 0.0)
        return CostTerms(lg + p - 1.0, 2.0 * frac, 0.0)  # scatter + all-gather
    if collective == "all_to_all":
        return CostTerms(p - 1.0, frac, 0.0)
    return CostTerms(1.0, 1.0, 0.0)  # send_recv


def predict_seconds(
    collective: str,
    nbytes: float,
    p: int,
    alpha: float,
    beta: float,
    gamma: float = 0.0,
    algorithm: str | None = None,
) -> float:
    """Alpha-beta(-gamma) time of one collective in seconds.

    alpha: latency per step (s); beta: s per byte on the link (1 / bus bandwidth);
    gamma: s per byte reduced (0 when folded into beta, as the calibration fit does)."""
    t = cost_terms(collective, p, algorithm)
    return t.latency_terms * alpha + nbytes * (t.bandwidth_terms * beta + t.reduce_terms * gamma)


def shared_beta(beta: float, sharing: int, nic_bytes_per_s: float | None) -> float:
    """Seconds per byte of one rank's transfer across nodes while ``sharing`` ranks of its node
    send at once: its own path's beta, or its share of the node's NIC (bytes/s) if slower."""
    if sharing < 1:
        raise ValueError(f"sharing must be >= 1, got {sharing}")
    if nic_bytes_per_s is None:
        return beta
    if nic_bytes_per_s <= 0:
        raise ValueError(f"NIC bandwidth must be > 0 bytes/s, got {nic_bytes_per_s}")
    return max(beta, sharing / nic_bytes_per_s)


def hierarchical_seconds(
    collective: str,
    nbytes: float,
    nodes: int,
    per_node: int,
    intra: tuple[float, float],
    inter: tuple[float, float],
) -> float:
    """All-reduce, all-gather or reduce-scatter over ``nodes`` x ``per_node`` ranks, two tiers.

    * all-reduce: reduce-scatter inside each node, all-reduce of n/per_node across nodes (each
      local rank drives its own slice), all-gather inside each node;
    * all-gather: all-gather of the n/per_node node-slices across nodes, then inside each node;
    * reduce-scatter: inside each node first, then across nodes on n/per_node.

    ``nbytes`` follows the module's convention (the buffer of all-reduce, the total output of
    all-gather, the total input of reduce-scatter); intra and inter are (alpha s, beta s/byte)
    of the two link tiers."""
    if collective == "all_reduce":
        return hierarchical_all_reduce_seconds(nbytes, nodes, per_node, intra, inter)
    if collective not in ("all_gather", "reduce_scatter"):
        raise ValueError(
            f"no two-tier model of {collective!r}: use all_reduce, all_gather or reduce_scatter"
        )
    if nodes < 1 or per_node < 1:
        raise ValueError(f"nodes and per_node must be >= 1, got {nodes} and {per_node}")
    t = predict_seconds(collective, nbytes, per_node, *intra) if per_node > 1 else 0.0
    if nodes > 1:
        t += predict_seconds(collective, nbytes / per_node, nodes, *inter)
    return t


def hierarchical_all_reduce_seconds(
    nbytes: float,
    nodes: int,
    per_node: int,
    intra: tuple[float, float],
    inter: tuple[float, float],
    nic_bytes_per_s: float | None = None,
) -> float:
    """All-reduce over ``nodes`` x ``per_node`` ranks as NCCL-style hierarchy: reduce-scatter inside
    each node, all-reduce of n/per_node across nodes, all-gather inside each node.

    intra and inter are (alpha s, beta s/byte) of the two link tiers (inter: one rank's path
    across nodes); nic_bytes_per_s caps a node's traffic (its per_node inter-node all-reduces run at
    once and share it)."""
    if nodes < 1 or per_node < 1:
        raise ValueError(f"nodes and per_node must be >= 1, got {nodes} and {per_node}")
    a_i, b_i = intra
    a_n, b_n = inter
    t = 0.0
    if per_node > 1:
        t += predict_seconds("reduce_scatter", nbytes, per_node, a_i, b_i)
        t += predict_seconds("all_gather", nbytes, per_node, a_i, b_i)
    if nodes > 1:
        b = shared_beta(b_n, per_node, nic_bytes_per_s)
        t += predict_seconds("all_reduce", nbytes / per_node, nodes, a_n, b)
    return t


#: Bytes around a TCP segment's payload on an Ethernet link as a shaper counts them: IPv4
#: header 20, TCP header 20 plus the 12-byte timestamp option Linux sends, Ethernet header 14
#: (RFC 791, RFC 9293, RFC 7323, IEEE 802.3). A pure ACK is 66 bytes.
TCP_IP_HEADER_BYTES = 52
ETHERNET_HEADER_BYTES = 14
TCP_ACK_FRAME_BYTES = 66
#: Linux acknowledges every second full segment (delayed ACK).
SEGMENTS_PER_ACK = 2


def tcp_efficiency(mtu: int = 1500, bidirectional: bool = True) -> float:
    """Payload over link bytes of a bulk TCP transfer on an Ethernet link shaped at its frame
    bytes (tc tbf counts the Ethernet header): (mtu - 52) / (mtu + 14), less the ACKs of the
    opposite direction's data when the link carries data both ways (all-reduce does):
    0.936 at MTU 1500, 0.989 at 9000."""
    if mtu <= TCP_IP_HEADER_BYTES:
        raise ValueError(f"MTU must exceed {TCP_IP_HEADER_BYTES} bytes, got {mtu}")
    frame = mtu + ETHERNET_HEADER_BYTES
    eff = (mtu - TCP_IP_HEADER_BYTES) / frame
    if bidirectional:
        eff *= 1.0 - TCP_ACK_FRAME_BYTES / (SEGMENTS_PER_ACK * frame)
    return eff
