"""The pipeline schedule as engine tasks: 1F1B (PipeDream-Flush, Megatron's default) and
Megatron's interleaved 1F1B with v model chunks per stage, each stage one rank class (its DP
and TP replicas behave alike), with warm-up, steady state and cool-down.

Per stage, in-order streams: ``compute`` (forward and backward work, the exposed tensor-parallel
collectives, the optimizer), ``send`` (point-to-point sends to the neighbouring stages: the
receiver's forward or backward waits on them as ``bubble``), ``dp`` (gradient collectives of the
last micro-batch's backward, layer by layer, overlapped with it; ZeRO 1-2's weight all-gather
after the optimizer), and with ZeRO-3 ``zero_ag`` / ``zero_rs`` (each layer's weights gathered
one layer ahead, for the backward only once the layer after has its gradients under FSDP's
BACKWARD_POST, ``Shape.gather_after_backward``; its gradients reduce-scattered after its
backward, every micro-batch).

Task durations are not fixed in the graph: each task names a *slot* (a per-layer or per-send
cost) and a multiplier, so one graph per schedule shape is re-timed for every configuration of
that shape (``Schedule.durations``). An uneven split (``Shape.stage_layers``: first or last stage
with its own layer count; ``Shape.chunk_layers``: a count per chunk of each stage, as with the
embedding or loss as a layer) keeps the graph of the largest chunk's count and scales each
chunk's per-layer tasks (``LAYER_SLOTS``) by its own count over that one, the once-per-step ones
(optimizer, weight gather) by the stage's (``scale_stages``). Megatron's point-to-point sends
block the sender unless its
p2p overlap is on (``--overlap-p2p-communication``): ``p2p_blocking`` puts them on the compute
stream. Megatron-LM before its overlapped gradient reduction (its 2021-22 "local" DDP) reduced
the gradients after the whole backward: ``dp_blocking`` puts them on the compute stream too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

import numpy as np

from stallscope.predict._engine import Graph, Stream

#: Slot names: per-layer and per-event costs a configuration gives values to (seconds).
SLOTS: Final[tuple[str, ...]] = (
    "f_comp", "f_tp", "b_comp", "b_tp", "f", "b",
    "embed_f", "embed_b", "logits_f", "logits_b", "send",
    "zero_ag", "zero_rs", "dp_layer", "dp_embed", "tied_embed",
    "opt_layer", "opt_embed", "param_ag_layer", "param_ag_embed",
)  # fmt: skip
_SLOT: Final = {n: i for i, n in enumerate(SLOTS)}
#: Slots whose multiplier counts layers (the others count events: embedding, logits, sends).
LAYER_SLOTS: Final[frozenset[str]] = frozenset(
    ("f_comp", "f_tp", "b_comp", "b_tp", "f", "b", "zero_ag", "zero_rs", "dp_layer",
     "opt_layer", "param_ag_layer")
)  # fmt: skip


def stage_order(pp: int, m: int, v: int, stage: int) -> list[tuple[str, int, int]]:
    """The compute order of ``stage``: ("F" | "B", chunk, micro-batch) per op (Megatron's
    interleaved order; v = 1 is plain 1F1B)."""
    total = m * v
    warm = min(total, (pp - stage - 1) * 2 + (v - 1) * pp) if v > 1 else min(m, pp - stage - 1)

    def which(k: int, backward: bool) -> tuple[int, int]:
        c = (k // pp) % v
        return (v - 1 - c if backward else c), (k // (pp * v)) * pp + k % pp

    ops: list[tuple[str, int, int]] = [("F", *which(k, False)) for k in range(warm)]
    for j in range(total - warm):
        ops.append(("F", *which(warm + j, False)))
        ops.append(("B", *which(j, True)))
    ops.extend(("B", *which(k, True)) for k in range(total - warm, total))
    return ops


#: Most pieces a chunk's work is cut into where collectives follow it layer by layer (ZeRO-3's
#: gathers, the gradients of the last backward): the exposed first gather and last gradient
#: collective are of nl / pieces layers, an error of at most one piece's collective per step.
MAX_PIECES: Final = 8


def _pieces(nl: int) -> int:
    """The largest divisor of ``nl`` that is at most MAX_PIECES."""
    return max(d for d in range(1, min(nl, MAX_PIECES) + 1) if nl % d == 0)


def in_flight(order: list[tuple[str, int, int]]) -> int:
    """Most (chunk, micro-batch) forwards whose backward has not run yet, at any point."""
    live = most = 0
    for op, _, _ in order:
        live += 1 if op == "F" else -1
        most = max(most, live)
    return most


@dataclass(frozen=True)
class Shape:
    """What fixes a schedule graph's structure."""

    pp: int
    micro_batches: int
    interleave: int
    layers_per_chunk: int
    zero3: bool
    dp_overlap: bool  # per-layer gradient collectives in the last backward (dp > 1, ZeRO < 3)
    tied: bool  # tied embedding all-reduce between first and last stage
    param_gather: bool  # ZeRO 1-2: weights all-gathered after the optimizer
    detail: bool  # compute and TP communication as separate tasks (for attribution)
    p2p_blocking: bool = False  # sends on the compute stream: the sender waits for them
    dp_blocking: bool = False  # gradient collectives on the compute stream, after the backward
    #: ZeRO-3's backward gathers start when the layer after has its gradients (BACKWARD_POST)
    gather_after_backward: bool = False
    tp_cat: str = "interconnect"
    send_cat: str = "interconnect"
    dp_cat: str = "network"
    #: layers per chunk of each stage when they differ (empty: every stage has
    #: ``layers_per_chunk``, which is then the largest of them)
    stage_layers: tuple[int, ...] = ()
    #: layers of each chunk of each stage (``[stage][chunk]``) when chunks of one stage differ
    #: (empty: ``stage_layers`` or the even split)
    chunk_layers: tuple[tuple[int, ...], ...] = ()
    #: dense layers of each chunk of each stage among MoE layers (``_layer_mix``; empty when
    #: every layer is of one kind)
    chunk_dense: tuple[tuple[int, ...], ...] = ()

    @property
    def scaled(self) -> bool:
        """Whether some stage's or chunk's layer count differs from ``layers_per_chunk``."""
        return bool(self.stage_layers or self.chunk_layers)

    def chunk_factors(self) -> list[list[float]]:
        """Per stage, per chunk: its layers over ``layers_per_chunk`` (1 for an even split)."""
        if self.chunk_layers:
            return [[n / self.layers_per_chunk for n in st] for st in self.chunk_layers]
        return [[f] * self.interleave for f in self.stage_factors()]

    def stage_factors(self) -> list[float]:
        """Per stage: its mean layers per chunk over ``layers_per_chunk`` (1 for an even
        split)."""
        if self.chunk_layers:
            return [sum(st) / len(st) / self.layers_per_chunk for st in self.chunk_layers]
        if not self.stage_layers:
            return [1.0] * self.pp
        return [n / self.layers_per_chunk for n in self.stage_layers]


@dataclass
class Schedule:
    """A pipeline schedule's graph plus, per task, its slot and multiplier."""

    shape: Shape
    graph: Graph
    slot: list[int] = field(default_factory=list)
    mult: list[float] = field(default_factory=list)
    chunk: list[int] = field(default_factory=list)  # per task: its chunk, -1 once per step
    stage: list[int] = field(default_factory=list)  # per task: its pipeline stage
    in_flight: list[int] = field(default_factory=list)  # per stage

    def durations(self, values: dict[str, float]) -> list[int]:
        """Task durations in ns for slot ``values`` in seconds."""
        ns = [values.get(n, 0.0) * 1e9 for n in SLOTS]
        return [round(ns[s] * k) for s, k in zip(self.slot, self.mult, strict=True)]


def build(shape: Shape) -> Schedule:
    """The schedule graph of ``shape`` (durations zero until ``durations`` fills them)."""
    p, m, v, nl = shape.pp, shape.micro_batches, shape.interleave, shape.layers_per_chunk
    g = Graph()
    sch = Schedule(shape, g)

    def unit(comp: int, ag: int, recent: list[int], phase: str, layers: int, label: str) -> int:
        """One piece of ``layers`` layers' work on stream ``comp``; returns its last task."""
        deps: tuple[int, ...] = ()
        if shape.zero3:
            ahead = 1 if phase == "B" and shape.gather_after_backward else 2
            gate = (recent[-ahead],) if len(recent) >= ahead else ()  # gather one layer ahead
            deps = (add(ag, "zero_ag", layers, shape.dp_cat, gate, f"{label} gather"),)
        lo = phase.lower()
        if shape.detail:
            add(comp, f"{lo}_comp", layers, "compute", deps, label)
            last = add(comp, f"{lo}_tp", layers, shape.tp_cat, (), f"{label} tp")
        else:
            last = add(comp, lo, layers, "compute", deps, label)
        recent.append(last)
        return last

    for s in range(p):
        g.rank_class(f"stage {s}", 1)
    pending: list[tuple[int, tuple[str, int, int, int]]] = []  # (task, key of its wait_on)
    current = [-1]  # the chunk of the op being added (-1: once-per-step work)
    sends: dict[tuple[str, int, int, int], int] = {}  # (phase, stage, chunk, mb) -> send task

    def add(
        stream: int, slot: str, mult: float, cat: str, deps: tuple[int, ...] = (), label: str = ""
    ) -> int:
        g.stream_of.append(stream)
        g.duration.append(0)
        g.deps.append(deps)
        g.wait_on.append(())
        g.wait_as.append("bubble")
        g.category.append(cat)
        g.label.append(label)
        g.nbytes.append(0)
        sch.slot.append(_SLOT[slot])
        sch.mult.append(mult)
        sch.chunk.append(current[0])
        return len(g.duration) - 1

    for s in range(p):
        comp = len(g.streams)
        g.streams.append(Stream("compute", s))
        send = len(g.streams)
        g.streams.append(Stream("send", s))
        dps = len(g.streams)
        g.streams.append(Stream("dp", s))
        ag = rs = -1
        if shape.zero3:
            ag = len(g.streams)
            g.streams.append(Stream("zero_ag", s))
            rs = len(g.streams)
            g.streams.append(Stream("zero_rs", s))
        order = stage_order(p, m, v, s)
        sch.in_flight.append(in_flight(order))
        last_b = {
            c: max(k for k, (op, cc, _) in enumerate(order) if op == "B" and cc == c)
            for c in range(v)
        }
        grad_tasks: list[int] = []
        recent: list[int] = []  # compute units, for the ZeRO-3 prefetch window

        for k, (op, c, i) in enumerate(order):
            current[0] = c
            gc = c * p + s  # global chunk index
            first_chunk, last_chunk = gc == 0, gc == p * v - 1
            up = (op, s - 1, c, i) if s > 0 else ((op, p - 1, c - 1, i) if c > 0 else None)
            down = (op, s + 1, c, i) if s < p - 1 else ((op, 0, c + 1, i) if c < v - 1 else None)
            waits_on = up if op == "F" else down
            tag = f"{op}{i} c{c}"
            n_before = len(g.duration)
            if op == "F":
                if first_chunk:
                    add(comp, "embed_f", 1, "compute", (), f"{tag} embedding")
                pieces = _pieces(nl) if shape.zero3 else 1
                for _ in range(pieces):
                    last = unit(comp, ag, recent, "F", nl // pieces, tag)
                if last_chunk:
                    last = add(comp, "logits_f", 1, "compute", (), f"{tag} logits")
                target = down
            else:
                if last_chunk:
                    add(comp, "logits_b", 1, "compute", (), f"{tag} logits")
                # overlapped gradient collectives follow the last backward of each chunk piece
                # by piece; blocking ones (dp_blocking) run after the stage's whole backward
                overlap_dp = shape.dp_overlap and k == last_b[c] and not shape.dp_blocking
                pieces = _pieces(nl) if shape.zero3 or overlap_dp else 1
                for _ in range(pieces):
                    last = unit(comp, ag, recent, "B", nl // pieces, tag)
                    if shape.zero3:
                        grad_tasks.append(
                            add(rs, "zero_rs", nl // pieces, shape.dp_cat, (last,), f"{tag} rs")
                        )
                    elif overlap_dp:
                        grad_tasks.append(
                            add(dps, "dp_layer", nl // pieces, shape.dp_cat, (last,), f"{tag} dp")
                        )
                if first_chunk:
                    last = add(comp, "embed_b", 1, "compute", (), f"{tag} embedding")
                target = (op, s - 1, c, i) if s > 0 else ((op, p - 1, c - 1, i) if c > 0 else None)
            if waits_on is not None:
                # the op's first task waits for its input from the neighbouring stage
                first_task = next(
                    t for t in range(n_before, len(g.duration)) if g.stream_of[t] == comp
                )
                pending.append((first_task, waits_on))
            if target is not None:
                on = comp if shape.p2p_blocking else send
                sends[(op, s, c, i)] = add(on, "send", 1, shape.send_cat, (last,), f"{tag} send")
        # end of step: embedding gradients, the optimizer, ZeRO 1-2's weight gather
        current[0] = -1
        if shape.dp_overlap and shape.dp_blocking and not shape.zero3:
            last = add(comp, "dp_layer", nl * v, shape.dp_cat, (last,), "gradients dp")
            grad_tasks.append(last)
        if shape.dp_overlap or shape.zero3:
            on = comp if shape.dp_blocking and not shape.zero3 else dps
            if s == 0:
                grad_tasks.append(add(on, "dp_embed", 1, shape.dp_cat, (last,), "embedding dp"))
            if s == p - 1 and not shape.tied:
                grad_tasks.append(add(on, "dp_embed", 1, shape.dp_cat, (last,), "output dp"))
        if shape.tied and s in (0, p - 1):
            on = comp if shape.dp_blocking else dps
            grad_tasks.append(add(on, "tied_embed", 1, shape.dp_cat, (last,), "tied embedding"))
        layers_here = nl * v
        opt = add(comp, "opt_layer", layers_here, "compute", tuple(grad_tasks), "optimizer")
        extra = (s == 0) + (s == p - 1 and not shape.tied)
        if extra:
            opt = add(comp, "opt_embed", extra, "compute", (), "optimizer embedding")
        if shape.param_gather:
            pg = add(dps, "param_ag_layer", layers_here, shape.dp_cat, (opt,), "weight gather")
            if extra:
                add(dps, "param_ag_embed", extra, shape.dp_cat, (pg,), "weight gather embedding")
    for task, key in pending:
        g.wait_on[task] = (sends[key],)
    stage = [g.streams[k].rank_class for k in g.stream_of]
    sch.mult = scale_stages(shape, sch.slot, stage, sch.chunk, sch.mult)
    return sch


def scale_stages(
    shape: Shape, slot: list[int], stage: list[int], chunk: list[int], mult: list[float]
) -> list[float]:
    """``mult`` with each per-layer task scaled to its chunk's own layer count, a once-per-step
    one (chunk -1: optimizer, weight gather, blocking gradient reduction) to its stage's mean
    over the chunks (unchanged for an even split)."""
    if not shape.scaled:
        return mult
    f = shape.chunk_factors()
    per_stage = shape.stage_factors()
    layer = {_SLOT[n] for n in LAYER_SLOTS}
    return [
        k if sl not in layer else k * (f[st][c] if c >= 0 else per_stage[st])
        for sl, st, c, k in zip(slot, stage, chunk, mult, strict=True)
    ]


def scale_stages_array(
    shape: Shape, slot: np.ndarray, stage: np.ndarray, chunk: np.ndarray, mult: np.ndarray
) -> np.ndarray:
    """``scale_stages`` on arrays (the native graph's, a task per element): the same
    multipliers, vectorised (a search scales hundreds of graphs of many thousand tasks)."""
    if not shape.scaled:
        return mult
    per_chunk = np.asarray(shape.chunk_factors(), dtype=np.float64)  # [stage, chunk]
    per_stage = np.asarray(shape.stage_factors(), dtype=np.float64)
    layer = np.isin(slot, [_SLOT[n] for n in LAYER_SLOTS])
    factor = np.where(chunk >= 0, per_chunk[stage, np.maximum(chunk, 0)], per_stage[stage])
    return np.where(layer, mult * factor, mult).astype(mult.dtype, copy=False)


@lru_cache(maxsize=4096)
def layers_in_flight(pp: int, m: int, v: int, stage: int, per_chunk: tuple[int, ...]) -> int:
    """Most layers' activations ``stage`` holds at once: the peak, along its compute order, of
    the layers of the (chunk, micro-batch) forwards whose backward has not run
    (``per_chunk[c]``: the layers of its chunk c). Cached: a search asks it of many
    configurations of one pipeline shape."""
    live = most = 0
    for op, c, _ in stage_order(pp, m, v, stage):
        live += per_chunk[c] if op == "F" else -per_chunk[c]
        most = max(most, live)
    return most


def in_flight_counts(pp: int, m: int, v: int) -> list[int]:
    """``in_flight`` of every stage without walking the orders: warm-up plus one, at most all
    (chunk, micro-batch) pairs."""
    if v == 1:
        return [min(m, pp - k) for k in range(pp)]
    return [min(m * v, (pp - k - 1) * 2 + (v - 1) * pp + 1) for k in range(pp)]
