"""Where each parallel group's ranks sit: Megatron's rank order, tensor parallel fastest, then
data parallel, then pipeline stages (rank = t + tp x (c + cp x (d + dp x p)), Megatron-LM's default
"tp-cp-ep-dp-pp" order with c the context-parallel rank), nodes of ``gpus_per_node`` consecutive ranks.

So tensor-parallel groups stay inside a node whenever tp divides the node, data-parallel groups
take the rest of the node and then span nodes, and pipeline neighbours are tp x dp ranks apart
(on another node once tp x dp reaches a node).

Experts follow Megatron-Core's expert order "tp-ep-dp-pp" within each pipeline stage's ranks:
rank = e_t + etp x (e + ep x d), so the expert-parallel group holds ranks etp apart and the
expert data-parallel group (what reduces the experts' gradients) ranks etp x ep apart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    """A group of ``size`` ranks over ``nodes`` nodes, ``per_node`` on each (uniform)."""

    size: int
    nodes: int

    @property
    def per_node(self) -> int:
        return self.size // self.nodes


@dataclass(frozen=True)
class Layout:
    tp: Placement
    dp: Placement  # the gradient group: data x context parallel ranks
    pp_cross_node: bool  # pipeline neighbours on different nodes
    cp: Placement = Placement(1, 1)
    ep: Placement = Placement(1, 1)  # the expert-parallel group (the all-to-alls)
    etp: Placement = Placement(1, 1)  # the GPUs of one expert's FFN
    edp: Placement = Placement(1, 1)  # the experts' gradient group


def _placement(ranks: list[int], gpus_per_node: int) -> Placement:
    nodes = len({r // gpus_per_node for r in ranks})
    return Placement(len(ranks), nodes)


def layout(
    tp: int, pp: int, dp: int, gpus_per_node: int, cp: int = 1, ep: int = 1, etp: int = 0
) -> Layout:
    """The placement of rank 0's groups (every group of a dimension is placed alike when the
    sizes divide the node or the node divides them); ``etp`` 0: tp."""
    g = gpus_per_node
    et = etp or tp
    tp_ranks = list(range(tp))
    cp_ranks = [tp * c for c in range(cp)]
    grad_ranks = [tp * k for k in range(cp * dp)]
    cross = pp > 1 and (tp * cp * dp) // g != 0
    edp = max(1, tp * cp * dp // (ep * et))
    return Layout(
        _placement(tp_ranks, g),
        _placement(grad_ranks, g),
        cross,
        _placement(cp_ranks, g),
        _placement([et * e for e in range(ep)], g),
        _placement(list(range(et)), g),
        _placement([et * ep * d for d in range(edp)], g),
    )
