"""A mixture of experts' token dispatch: how many copies of a GPU's tokens cross each link tier
on their way to the experts' GPUs, under the stack's token dispatcher (``Stack.moe_dispatcher``).

* ``alltoall`` (Megatron-Core's ``MoEAlltoAllTokenDispatcher``): the router's top_k picks are
  permuted into one copy per (token, expert) and exchanged by an all-to-all over the
  expert-parallel group; with balanced routing a share (ranks on the node - 1) / ep of the
  top_k copies crosses NVLink, (ep - ranks on the node) / ep the network.
* ``flex`` (Megatron-Core's ``MoEFlexTokenDispatcher`` with DeepEP or HybridEP): a token goes
  once to each GPU that holds at least one of its experts, which expands it to its experts
  there; across nodes it goes once over the network to each node that holds one (to the GPU of
  the same local index) and that GPU forwards it over NVLink to the others of its node that
  need it. The combine returns one partial sum per GPU (per node over the network) the same way.

With routing balanced at random (every set of top_k experts alike, as Megatron's forced load
balancing draws them), a GPU holding ``r`` of the ``E`` experts receives a token with
probability 1 - C(E - r, k) / C(E, k), and a node holding ``R`` of them likewise. Per token of a
rank, on an expert-parallel group of ``n`` nodes of ``g`` ranks each, the flex dispatcher sends

    network: (n - 1) x P(node)        NVLink: n x (g - 1) x P(rank)

copies (NVLink: its own tokens to the GPUs of its node, and the forwarding of the tokens that
reached it from the n - 1 other nodes), where the all-to-all sends top_k x (ep - g) / ep and
top_k x (g - 1) / ep. Eight of 128 experts on 8 GPUs of one node: 4.67 copies per token over
NVLink against 7; on 16 GPUs of two nodes, 1.0 over the network against 4.
"""

from __future__ import annotations

from math import comb
from typing import TYPE_CHECKING

from stallscope.plan._comm import all_to_all_s, collective_s, tiered_s
from stallscope.plan._layer import ACT_BYTES
from stallscope.plan._strategy import ffn_rows_width

if TYPE_CHECKING:
    from stallscope.plan._cluster import Cluster
    from stallscope.plan._layout import Layout, Placement
    from stallscope.plan._model import Model
    from stallscope.plan._strategy import Strategy


def holds_any(experts: int, held: int, top_k: int) -> float:
    """Probability that a token's ``top_k`` experts, drawn at random among ``experts``, include
    at least one of ``held`` given ones."""
    if held >= experts or experts - held < top_k:
        return 1.0
    return 1.0 - comb(experts - held, top_k) / comb(experts, top_k)


def flex_copies(model: Model, group: Placement) -> tuple[float, float]:
    """(NVLink, network) copies per token of one rank under the flex dispatcher over the
    expert-parallel ``group`` (see the module doc)."""
    per_rank = model.experts // group.size
    rank = holds_any(model.experts, per_rank, model.top_k)
    node = holds_any(model.experts, per_rank * group.per_node, model.top_k)
    return group.nodes * (group.per_node - 1) * rank, (group.nodes - 1) * node


def expert_dispatch_s(
    model: Model, s: Strategy, system: Cluster, lay: Layout, tokens: int
) -> float:
    """Seconds of one way of the token dispatcher for one layer and micro-batch: this GPU's
    routed tokens to the experts' GPUs (16 bit) under the stack's dispatcher, and with
    etp > 1 their all-gather over the GPUs of each expert (the way back: the same sizes)."""
    rows, _ = ffn_rows_width(model, s, tokens)
    copies = rows // s.expert_tp * model.hidden * ACT_BYTES  # before the etp all-gather
    if s.software.moe_dispatcher == "flex":
        nvlink, network = flex_copies(model, lay.ep)
        per_copy = copies / model.top_k  # the rank's tokens, once each
        t = tiered_s(system, lay.ep, nvlink * per_copy, network * per_copy)
    else:
        t = all_to_all_s(system, copies, lay.ep)
    if s.expert_tp > 1:
        t += collective_s(system, "all_gather", copies * s.expert_tp, lay.etp)
    return t
