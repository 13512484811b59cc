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
    "all_reduce": ("ring", "rabenseifner", "recursive_doubling"),
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


def hierarchical_all_reduce_seconds(
    nbytes: float,
    nodes: int,
    per_node: int,
    intra: tuple[float, float],
    inter: tuple[float, float],
) -> float:
    """All-reduce over ``nodes`` x ``per_node`` ranks as NCCL-style hierarchy: reduce-scatter inside
    each node, all-reduce of n/per_node across nodes, all-gather inside each node.

    intra and inter are (alpha s, beta s/byte) of the two link tiers."""
    if nodes < 1 or per_node < 1:
        raise ValueError(f"nodes and per_node must be >= 1, got {nodes} and {per_node}")
    a_i, b_i = intra
    a_n, b_n = inter
    t = 0.0
    if per_node > 1:
        t += predict_seconds("reduce_scatter", nbytes, per_node, a_i, b_i)
        t += predict_seconds("all_gather", nbytes, per_node, a_i, b_i)
    if nodes > 1:
        t += predict_seconds("all_reduce", nbytes / per_node, nodes, a_n, b_n)
    return t
