"""A pipeline layout: which layers each (stage, chunk) holds, in Megatron-Core's notation.

Megatron-Core's ``pipeline_model_parallel_layout`` (``--pipeline-model-parallel-layout``,
megatron/core/transformer/pipeline_parallel_layer_layout.py) writes the model's layers in
order as a string: ``E`` the embedding, ``t`` a transformer layer, ``m`` a multi-token
prediction layer (right before the loss: the planner times them with it), ``L`` the loss (the
output layer), ``|`` the end of one pipeline chunk. ``(...)*n`` repeats a group, ``x*n`` a letter,
commas are cosmetic. The chunks are in the model's order, so with pp stages and v chunks each,
chunk ``i`` of the string runs on stage ``i % pp`` as its chunk ``i // pp`` (the interleaved
order); v is the string's chunk count over pp. A layout may give each chunk its own number of
layers, none included, which the first / last stage counts and the embedding / loss as a layer
cannot: Llama 3 405B's 126 layers on 16 stages with a layer fewer on the first and the last,
under interleaving, are ``Et*3|(t*4|)*30,t*3L`` at v = 2: 32 chunks, stage 0 holding chunks 0
(3 layers) and 16 (4), stage 15 chunks 15 (4) and 31 (3).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from stallscope.plan._errors import PlanError, divisors, listed, nearest_values
from stallscope.plan._model import Model

if TYPE_CHECKING:
    from stallscope.plan._strategy import Strategy

#: The letters of a layout and what they stand for (Megatron-Core's, less what the planner
#: does not model)
LETTERS: Final = {
    "E": "the embedding",
    "t": "a transformer layer",
    "m": "a multi-token prediction layer",
    "L": "the loss",
}
_GROUP: Final = re.compile(r"\(([^()]*)\)\*(\d+)")
_LETTER: Final = re.compile(r"([^()|*\d])\*(\d+)")
#: Most letters and chunks a layout may unroll to (a typo such as t*999999 stays an error)
MAX_UNROLLED: Final = 1_000_000


#: Megatron-Core's LayerType names (a layout given as a list) and their letters
LAYER_TYPES: Final = {"embedding": "E", "decoder": "t", "loss": "L", "mtp": "m"}


def layout_string(layout: str | Sequence[Sequence[str]]) -> str:
    """A layout as Megatron-Core's notation: a string as it is, or the list form Megatron-Core
    also takes (one list of LayerType names per chunk in model order, ``[["embedding",
    "decoder"], ["decoder", "loss"]]``; the letters do too) written out."""
    if isinstance(layout, str):
        return layout
    if not isinstance(layout, Sequence) or not all(
        isinstance(c, Sequence) and not isinstance(c, str) for c in layout
    ):
        raise PlanError(
            "a pipeline layout is a string such as 'Et*3|(t*4|)*6t*3L' or a list of chunks, each a "
            f"list of layer types ({', '.join(LAYER_TYPES)}), got {layout!r}"
        )
    chunks = []
    for chunk in layout:
        letters = []
        for name in chunk:
            key = str(name).strip()
            letter = LAYER_TYPES.get(key.lower(), key if key in LAYER_TYPES.values() else "")
            if not letter:
                raise PlanError(
                    f"pipeline layout: {name!r} is not a layer type; use "
                    f"{', '.join(LAYER_TYPES)} (or their letters {', '.join(LAYER_TYPES.values())})"
                )
            letters.append(letter)
        chunks.append("".join(letters))
    return write_layout(chunks)


def _bad(layout: str, why: str, fix: str) -> PlanError:
    return PlanError(f"pipeline layout {layout!r}: {why}; {fix}")


def parse(layout: str) -> list[str]:
    """The layout's chunks in model order, each as its letters (``"Ett"``), repeats unrolled;
    PlanError for what is not Megatron-Core's notation or what the planner does not model."""
    if not isinstance(layout, str) or not layout.strip():
        raise PlanError(
            f"a pipeline layout is a non-empty string such as 'Et*3|(t*4|)*6t*3L', got {layout!r}"
        )
    text = re.sub(r"[\s,]", "", layout)
    for pattern in (_GROUP, _LETTER):
        size = len(text)
        for m in pattern.finditer(text):
            size += len(m.group(1)) * int(m.group(2)) - len(m.group(0))
        if size > MAX_UNROLLED:
            raise _bad(layout, f"it unrolls to {size:,} letters", "check the repeat counts")
        text = pattern.sub(lambda m: m.group(1) * int(m.group(2)), text)
    odd = sorted({c for c in text if c not in LETTERS and c != "|"})
    if odd:
        known = ", ".join(f"'{k}' {v}" for k, v in LETTERS.items())
        raise _bad(
            layout,
            f"{listed([repr(c) for c in odd])} {'is not a letter' if len(odd) == 1 else 'are not letters'}"
            f" of the notation",
            f"use {known}, '|' between chunks, '(...)*n' and 'x*n' to repeat",
        )
    return text.split("|")


def check_layout(model: Model, s: Strategy) -> None:
    """Raise PlanError naming the first of Megatron-Core's layout rules ``s.pipeline_layout``
    breaks for ``model``, and the fix."""
    layout = s.pipeline_layout
    assert layout is not None
    if (
        s.first_stage_layers is not None
        or s.last_stage_layers is not None
        or s.embedding_as_layer
        or s.loss_as_layer
    ):
        raise PlanError(
            "a pipeline layout gives every chunk's layers: it excludes first / last stage layer "
            "counts and the embedding / loss as a layer (write those into the layout)"
        )
    chunks = parse(layout)
    n = len(chunks)
    if n % s.pp:
        pps = [p for p in divisors(n) if p > 1]
        raise _bad(
            layout,
            f"its {n} chunks do not split over pp={s.pp} stages (the chunk count is pp x "
            f"interleave)",
            f"nearest valid pp: {listed(nearest_values(s.pp, pps))}"
            if pps
            else "add or merge chunks",
        )
    if n // s.pp != s.interleave:
        raise _bad(
            layout,
            f"its {n} chunks on pp={s.pp} stages are {n // s.pp} chunks per stage, but "
            f"interleave={s.interleave}",
            f"set interleave {n // s.pp}",
        )
    flat = "".join(chunks)
    for letter, where, placed in (
        ("E", "start of the first", chunks[0].startswith("E")),
        ("L", "end of the last", chunks[-1].endswith("L")),
    ):
        count = flat.count(letter)
        if count != 1 or not placed:
            why = (
                "is missing"
                if not count
                else f"stands {count} times"
                if count > 1
                else "stands elsewhere"
            )
            raise _bad(
                layout,
                f"'{letter}' ({LETTERS[letter]}) {why}: it stands once, at the {where} chunk",
                f"the planner runs the embedding first on the first stage and the loss last on "
                f"the last stage: write '{letter}' there",
            )
    mtp = flat.count("m")
    if mtp != model.mtp_layers:
        raise _bad(
            layout,
            f"it holds {mtp} multi-token prediction layers ('m') but {model.name!r} has "
            f"{model.mtp_layers}",
            f"write {model.mtp_layers} 'm' right before 'L'" if model.mtp_layers else "drop them",
        )
    if mtp and not chunks[-1].endswith("m" * mtp + "L"):
        raise _bad(
            layout,
            "the multi-token prediction layers ('m') stand apart from the loss",
            "write them right before 'L' in the last chunk: the planner times them with the "
            "loss on the last stage (a stage of their own is not modelled)",
        )
    layers = flat.count("t")
    if layers != model.layers:
        raise _bad(
            layout,
            f"it holds {layers} transformer layers ('t') but {model.name!r} has {model.layers}",
            f"{'add' if layers < model.layers else 'remove'} {abs(layers - model.layers)}",
        )


@lru_cache(maxsize=64)
def _chunk_counts(layout: str) -> tuple[int, ...]:
    """Transformer layers of each chunk of ``layout`` in model order (parsed once per layout)."""
    return tuple(c.count("t") for c in parse(layout))


def layout_chunk_layers(s: Strategy) -> tuple[tuple[int, ...], ...]:
    """Transformer layers of each chunk of each stage (``[stage][chunk]``) of a checked layout."""
    assert s.pipeline_layout is not None
    counts = _chunk_counts(s.pipeline_layout)
    return tuple(tuple(counts[v * s.pp + p] for v in range(s.interleave)) for p in range(s.pp))


def _letters(chunk: str) -> str:
    """One chunk with runs of a letter as ``x*n``."""
    return "".join(
        m.group(1) if len(m.group(0)) == 1 else f"{m.group(1)}*{len(m.group(0))}"
        for m in re.finditer(r"(.)\1*", chunk)
    )


def write_layout(chunks: list[str]) -> str:
    """The layout string of ``chunks`` (each its letters, in model order), runs of equal chunks
    as ``(...|)*n`` and of a letter as ``x*n``: ``parse(write_layout(c)) == c``."""
    out: list[str] = []
    i = 0
    while i < len(chunks):
        j = i
        while j + 1 < len(chunks) and chunks[j + 1] == chunks[i]:
            j += 1
        last = j == len(chunks) - 1
        run = j - i + (0 if last else 1)  # the final chunk has no "|" to repeat with
        if run >= 2 and chunks[i]:
            out.append(f"({_letters(chunks[i])}|)*{run}")
            i += run
        else:
            out.append(_letters(chunks[i]) + ("" if i == len(chunks) - 1 else "|"))
            i += 1
    return "".join(out)
