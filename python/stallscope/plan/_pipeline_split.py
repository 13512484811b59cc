"""The layers each pipeline stage and each of its chunks holds.

The layers split evenly over the pipeline stages unless ``first_stage_layers`` /
``last_stage_layers`` are given (Megatron-Core's ``num_layers_in_first_pipeline_stage`` /
``num_layers_in_last_pipeline_stage``, Megatron-LM's ``--decoder-first-pipeline-num-layers`` /
``--decoder-last-pipeline-num-layers``): those stages hold the given counts and the middle
stages split the rest evenly. With interleaving every stage's count must divide by the
interleave (each of its chunks holds the same share), as Megatron-Core requires
(``TransformerConfig.__post_init__``, megatron/core/transformer/transformer_config.py).

``embedding_as_layer`` / ``loss_as_layer`` are Megatron-Core's
``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``: the
embedding and the loss each count as one layer, the layers plus those split evenly over the
pp x interleave chunks, and the first chunk of the first stage (the last chunk of the last stage)
builds one transformer layer fewer (``get_num_layers_to_build``,
megatron/core/transformer/transformer_block.py). They exclude the first / last stage counts.

A pipeline layout (``_pipeline_layout``) gives every chunk's count itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from stallscope.plan._errors import PlanError, divisors, listed, nearest_values
from stallscope.plan._model import Model
from stallscope.plan._pipeline_layout import layout_chunk_layers

if TYPE_CHECKING:
    from stallscope.plan._strategy import Strategy


#: The splits the search tries by name: (embedding as a layer, loss as a layer)
SPLITS: Final[dict[str, tuple[bool, bool]]] = {
    "even": (False, False),
    "embedding": (True, False),
    "loss": (False, True),
    "embedding+loss": (True, True),
}


#: The search's split for layers that no stage count divides: Megatron-Core's first and last
#: stage counts (``uneven_split``), named in a table as "uneven F/L"
UNEVEN: Final = "uneven"


def split_name(s: Strategy) -> str:
    """The SPLITS name of ``s``'s split, "uneven F/L" for first and last stage counts ("" for
    a layout, or for one count alone)."""
    first, last = s.first_stage_layers, s.last_stage_layers
    if first is not None and last is not None and s.pipeline_layout is None:
        return f"{UNEVEN} {first}/{last}"
    if any(x is not None for x in (s.pipeline_layout, first, last)):
        return ""
    return next(k for k, v in SPLITS.items() if v == (s.embedding_as_layer, s.loss_as_layer))


def parse_split_name(name: str) -> dict[str, object]:
    """The Strategy fields of a ``split_name``."""
    if name.startswith(UNEVEN + " "):
        first, last = name.removeprefix(UNEVEN + " ").split("/")
        return {"first_stage_layers": int(first), "last_stage_layers": int(last)}
    e, lo = SPLITS[name]
    return {"embedding_as_layer": e, "loss_as_layer": lo}


def uneven_split(layers: int, pp: int, v: int) -> tuple[int, int] | None:
    """First and last stage layer counts for ``layers`` that pp stages do not divide (61 on 16:
    3 and 2): the middle stages hold n each, the smallest multiple of v at or above layers /
    pp, the first and last the rest, the first the larger half (the last also holds the loss),
    each a positive multiple of v no larger than n (Megatron-Core's rule for
    num_layers_in_first/last_pipeline_stage). None where an even split exists or none fits."""
    if pp < 2 or layers % pp == 0:
        return None
    n = -(-layers // pp)
    n = -(-n // v) * v
    rest = layers - (pp - 2) * n
    last = rest // 2 // v * v
    first = rest - last
    if last < v or first % v or first > n:
        return None
    return first, last


def chunk_layers(model: Model, s: Strategy) -> tuple[tuple[int, ...], ...]:
    """Transformer layers of each chunk of each pipeline stage (``[stage][chunk]``, ``check``
    first): every chunk of a stage holds its share, but with the embedding (loss) as a layer the
    first chunk of the first stage (the last chunk of the last stage) holds one fewer; a
    pipeline layout gives each chunk's count."""
    if s.pipeline_layout is not None:
        return layout_chunk_layers(s)
    if s.as_layers:
        each = (model.layers + s.as_layers) // (s.pp * s.interleave)
        out = [[each] * s.interleave for _ in range(s.pp)]
        out[0][0] -= s.embedding_as_layer
        out[-1][-1] -= s.loss_as_layer
        return tuple(tuple(c) for c in out)
    return tuple((n // s.interleave,) * s.interleave for n in stage_layers(model, s))


def stage_layers(model: Model, s: Strategy) -> tuple[int, ...]:
    """Transformer layers of each pipeline stage (all its chunks), first to last: the given
    first / last counts and the rest split evenly over the middle stages, or the embedding /
    loss as a layer (``chunk_layers``) (``check`` first)."""
    first, last = s.first_stage_layers, s.last_stage_layers
    if s.as_layers or s.pipeline_layout is not None:
        return tuple(sum(c) for c in chunk_layers(model, s))
    if not s.uneven:
        return (model.layers // s.pp,) * s.pp
    middle = s.pp - (first is not None) - (last is not None)
    rest = model.layers - (first or 0) - (last or 0)
    each = rest // middle if middle else 0
    out = [each] * s.pp
    if first is not None:
        out[0] = first
    if last is not None:
        out[-1] = last
    return tuple(out)


def _uneven_rule(layers: int, pp: int, v: int, first: int | None, last: int | None) -> str:
    """The Megatron-Core rule an uneven split breaks ("" when it breaks none)."""
    for name, n in (("first", first), ("last", last)):
        if n is not None and n < 1:
            return f"the {name} stage must hold at least one layer, got {n}"
        if n is not None and n % v:
            return (
                f"the {name} stage's {n} layers must divide by the interleave ({v}): each of "
                f"its chunks holds the same number of layers"
            )
    middle = pp - (first is not None) - (last is not None)
    rest = layers - (first or 0) - (last or 0)
    if middle < 0:
        return "a first and a last stage need pipeline parallelism of at least 2"
    if rest < 0 or bool(rest) != bool(middle):
        return (
            f"{rest} layers are left for the {middle} middle stage(s): every middle stage "
            f"holds at least one layer, and without middle stages none may be left"
        )
    if middle and rest % middle:
        return f"the {rest} layers left do not split evenly over the {middle} middle stages"
    if middle and rest // middle % v:
        return (
            f"the middle stages' {rest // middle} layers must divide by the interleave ({v}): "
            f"each of their chunks holds the same number of layers"
        )
    return ""


def check_uneven(model: Model, s: Strategy) -> None:
    first, last = s.first_stage_layers, s.last_stage_layers
    for name, n in (("first_stage_layers", first), ("last_stage_layers", last)):
        if n is not None and (not isinstance(n, int) or isinstance(n, bool)):
            raise PlanError(f"{name} must be a whole number, got {n!r}")
    if s.pp < 2:
        raise PlanError(
            "first / last stage layer counts split the layers over pipeline stages: they need "
            "pp > 1 (or leave them unset for the even split)"
        )
    rule = _uneven_rule(model.layers, s.pp, s.interleave, first, last)
    if not rule:
        return
    n = model.layers
    hints = []
    if first is not None:
        ok = [f for f in range(1, n + 1) if not _uneven_rule(n, s.pp, s.interleave, f, last)]
        if ok:
            hints.append(f"first-stage layers {listed(nearest_values(first, ok))}")
    if last is not None:
        ok = [x for x in range(1, n + 1) if not _uneven_rule(n, s.pp, s.interleave, first, x)]
        if ok:
            hints.append(f"last-stage layers {listed(nearest_values(last, ok))}")
    if first is not None and last is not None:
        ok = [x for x in range(1, n + 1) if not _uneven_rule(n, s.pp, s.interleave, x, x)]
        if ok:
            hints.append(f"equal first and last of {listed(nearest_values(first, ok))}")
    if s.interleave > 1:
        vs = [v for v in divisors(n) if not _uneven_rule(n, s.pp, v, first, last)]
        if vs:
            hints.append(f"interleave {listed(nearest_values(s.interleave, vs))}")
    fix = ("nearest valid: " + "; or ".join(hints)) if hints else "change pp or the interleave"
    raise PlanError(
        f"uneven pipeline split of {model.name!r} ({n} layers, pp={s.pp}, "
        f"interleave={s.interleave}, first={first}, last={last}): {rule} (Megatron-Core's "
        f"rule for num_layers_in_first/last_pipeline_stage); {fix}"
    )


def _as_layer_rule(layers: int, pp: int, v: int) -> str:
    """The Megatron-Core rule a split of ``layers`` (embedding / loss slots included) over pp
    stages of v chunks breaks ("" when it breaks none)."""
    if layers % pp:
        return f"the {layers} layers do not split evenly over the {pp} pipeline stages"
    if layers // pp % v:
        return (
            f"each stage's {layers // pp} layers must divide by the interleave ({v}): every "
            f"chunk holds the same number of layers"
        )
    return ""


def check_as_layers(model: Model, s: Strategy) -> None:
    for name in ("embedding_as_layer", "loss_as_layer"):
        if not isinstance(getattr(s, name), bool):
            raise PlanError(f"{name} must be true or false, got {getattr(s, name)!r}")
    if s.first_stage_layers is not None or s.last_stage_layers is not None:
        raise PlanError(
            "the embedding / loss as a pipeline layer and first / last stage layer counts "
            "exclude each other (Megatron-Core refuses account_for_embedding/loss_in_pipeline_"
            "split with num_layers_in_first/last_pipeline_stage): give one or the other"
        )
    total = model.layers + s.as_layers
    rule = _as_layer_rule(total, s.pp, s.interleave)
    if not rule:
        return
    hints = []
    pps = [p for p in divisors(total) if p > 1 and not _as_layer_rule(total, p, 1)]
    if s.interleave > 1:
        vs = [v for v in divisors(total) if not _as_layer_rule(total, s.pp, v)]
        if vs:
            hints.append(f"interleave {listed(nearest_values(s.interleave, vs))}")
        pps = [p for p in pps if not _as_layer_rule(total, p, s.interleave)]
    if pps:
        hints.append(f"pp {listed(nearest_values(s.pp, pps))}")
    for e, lo in ((True, True), (True, False), (False, True), (False, False)):
        n = model.layers + e + lo
        if (e, lo) != (s.embedding_as_layer, s.loss_as_layer) and not _as_layer_rule(
            n, s.pp, s.interleave
        ):
            what = [w for w, on in (("embedding", e), ("loss", lo)) if on]
            hints.append(f"{' and '.join(what)} as a layer" if what else "neither as a layer")
    fix = ("nearest valid: " + "; or ".join(hints)) if hints else "change pp or the interleave"
    slots = " + ".join(
        [str(model.layers)]
        + ["1 (embedding)"] * s.embedding_as_layer
        + ["1 (loss)"] * s.loss_as_layer
    )
    raise PlanError(
        f"pipeline split of {model.name!r} with the embedding / loss as layers ({slots} = "
        f"{total} layers, pp={s.pp}, interleave={s.interleave}): {rule} (Megatron-Core's rule "
        f"for account_for_embedding/loss_in_pipeline_split); {fix}"
    )
