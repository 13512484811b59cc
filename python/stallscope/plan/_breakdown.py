"""Where a predicted step goes: the compute of one GPU by part (each GEMM of a layer, attention,
element-wise work, recompute, embedding and logits, the optimizer) next to the exposed
communication, the pipeline bubble and the rest, averaged over the pipeline stages
(``breakdown``); and one layer's forward and backward for one micro-batch, part by part
(``layer_breakdown``), what a per-layer profile of the job measures.

The compute parts are the per-layer costs (``_layer``) times the layers and micro-batches a
stage runs, and the compute lost to communication beside it (``contention``); the others are the simulated step's stall columns. ``compute_other`` is what the
simulated compute holds beyond the counted parts (zero unless a cost is added outside the
per-layer parts), so the rows sum to the step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from stallscope.plan._layer import LAYER_PARTS

if TYPE_CHECKING:
    from stallscope.plan._costs import Costs
    from stallscope.plan._predict import Prediction

#: The stall columns that are not compute, in the order the breakdown lists them.
_OTHER = ("interconnect", "network", "bubble", "memcpy", "sync_wait", "host")


def breakdown(p: Prediction, c: Costs) -> pl.DataFrame:
    """One row per part: ``part``, ``seconds`` (per step, mean over stages), ``share`` of the
    step; the rows sum to the step."""
    s, m = p.strategy, p.strategy.micro_batches
    stages = s.pp
    layers = p.model.layers / stages  # mean layers per stage (also of an uneven split)
    rows: dict[str, float] = {}
    if c.layer is not None:
        fp, bp = dict(c.layer.f_parts), dict(c.layer.b_parts)
        for part in LAYER_PARTS:
            rows[part] = (fp[part] + bp[part]) * layers * m
    else:  # costs without parts: the layer as one
        rows["layer"] = (c.f_comp + c.b_comp) * layers * m
    rows["contention"] = (c.contention_f + c.contention_b) * layers * m
    rows["contention"] += c.contention_step_layer * layers
    ends = (c.embed_f + c.embed_b + c.logits_f + c.logits_b) * m / stages
    rows["embedding_and_logits"] = ends
    extra = (1 + (0 if p.model.tied_embeddings else 1)) / stages
    rows["fp8_weight_cast"] = c.weight_cast_layer * layers
    own = c.opt_layer - c.weight_cast_layer - c.contention_step_layer
    rows["optimizer"] = own * layers + c.opt_embed * extra
    cols = p.columns()
    step = p.step_ns * 1e-9
    counted = sum(rows.values())
    rows["compute_other"] = max(0.0, cols["compute_ns"] * 1e-9 - counted)
    for k in _OTHER:
        rows[k] = cols[f"{k}_ns"] * 1e-9
    total = sum(rows.values())
    scale = step / total if total > 0 else 1.0  # the static count against the simulated step
    return pl.DataFrame(
        {
            "part": list(rows),
            "seconds": [v * scale for v in rows.values()],
            "share": [v * scale / step if step else 0.0 for v in rows.values()],
        }
    )


def layer_breakdown(c: Costs) -> pl.DataFrame:
    """One transformer layer, one micro-batch, one GPU: ``part`` (the layer's compute parts,
    ``contention``: compute lost to collectives beside it, ``communication``: its tensor-,
    context- and expert-parallel collectives left exposed), ``forward_s``, ``backward_s``
    (recompute included); the rows sum to the layer's forward and backward."""
    if c.layer is not None:
        fp, bp = dict(c.layer.f_parts), dict(c.layer.b_parts)
        rows = {part: (fp[part], bp[part]) for part in LAYER_PARTS}
    else:  # costs without parts: the layer as one
        rows = {"layer": (c.f_comp - c.contention_f, c.b_comp - c.contention_b)}
    rows["contention"] = (c.contention_f, c.contention_b)
    rows["communication"] = (c.f_tp, c.b_tp)
    return pl.DataFrame(
        {
            "part": list(rows),
            "forward_s": [f for f, _ in rows.values()],
            "backward_s": [b for _, b in rows.values()],
        }
    )
