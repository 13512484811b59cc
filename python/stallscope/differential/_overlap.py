"""The communication stall DDP's bucketed overlap predicts (PyTorch DDP launches a bucket's
all-reduce when all its gradients are ready; the all-reduces run one after another; only what
runs past the end of the backward pass is exposed):

    F_0 = r_0 + T(b_0),   F_i = max(F_{i-1}, r_i) + T(b_i),   exposed = F_last - end of backward

r_i: when bucket i's gradients are ready, taken in proportion to the bytes of the buckets
launched up to it over the backward pass (gradients are computed at a steady rate);
T(b): the all-reduce of b bytes with the alpha-beta model of stallscope.comm._formulas (ring
all-reduce; across nodes with ranks_per_node > 1 NCCL-style hierarchy, the intra-node tier
taken as free beside a shaped link).
"""

from __future__ import annotations

from collections.abc import Sequence

from stallscope.comm._formulas import hierarchical_all_reduce_seconds, predict_seconds
from stallscope.exceptions import AnalyzeError


def allreduce_s(
    nbytes: float, nodes: int, ranks_per_node: int, rate_bps: float, alpha_s: float
) -> float:
    """Seconds of one all-reduce of nbytes across nodes x ranks_per_node ranks whose nodes are
    joined by links of rate_bps bits/s (beta = 8 / rate_bps s/byte)."""
    beta = 8.0 / rate_bps
    if ranks_per_node == 1:
        return predict_seconds("all_reduce", nbytes, nodes, alpha_s, beta)
    return hierarchical_all_reduce_seconds(
        nbytes, nodes, ranks_per_node, (0.0, 0.0), (alpha_s, beta)
    )


def exposed_comm_ns(
    backward_ns: float,
    buckets: Sequence[int],
    *,
    nodes: int,
    ranks_per_node: int,
    rate_bps: float,
    alpha_s: float = 0.0,
) -> float:
    """The exposed communication (ns) of one DDP step: `buckets` are the bucket sizes in bytes
    in launch order, `backward_ns` the backward pass's compute time."""
    if backward_ns < 0 or rate_bps <= 0 or nodes < 1 or ranks_per_node < 1:
        raise AnalyzeError(
            f"bucketed overlap needs backward >= 0 ns, a rate > 0 and a layout >= 1x1; got "
            f"{backward_ns}, {rate_bps}, {nodes}x{ranks_per_node}"
        )
    if nodes * ranks_per_node == 1 or not buckets:
        return 0.0
    total = float(sum(buckets))
    finish = 0.0
    done = 0.0
    for b in buckets:
        done += b
        ready = backward_ns * done / total if total > 0 else backward_ns
        t = allreduce_s(b, nodes, ranks_per_node, rate_bps, alpha_s) * 1e9
        finish = max(finish, ready) + t
    return max(finish - backward_ns, 0.0)
