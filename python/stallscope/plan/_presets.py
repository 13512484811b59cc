"""Decoder-transformer model presets with their sources, from ``data/models.json``.

``model(name)`` resolves a preset name or alias (``"gpt3-175b"``, ``"Llama 3.1 405B"``,
``"MT-NLG"``) case-insensitively; ``models()`` is the table as a Polars frame. Defaults of the
file format: ``kv_heads`` = ``heads`` (no grouped-query attention), ``ffn_hidden`` =
4 x ``hidden``, ``gated_ffn`` false. The catalog reader is shared with ``stallscope.predict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

import polars as pl

from stallscope.predict._catalog import (
    CatalogError,
    Fields,
    NameIndex,
    Source,
    load_entries,
    parse_source,
    parse_sources,
)

_PACKAGE: Final = "stallscope.plan"
_FILE: Final = "models.json"
_PATH: Final = "stallscope/plan/data/models.json"
#: The shape keys of a preset, all sourced.
SHAPE_KEYS: Final = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab")
#: The mixture-of-experts keys of a preset (0 for a dense model) and ``head_dim`` (0: hidden /
#: heads), sourced like the shape keys.
MOE_KEYS: Final = (
    "experts",
    "top_k",
    "moe_ffn_hidden",
    "head_dim",
    "shared_ffn_hidden",
    "kv_lora_rank",
    "q_lora_rank",
    "rope_head_dim",
    "v_head_dim",
    "mtp_layers",
)


@dataclass(frozen=True)
class ModelShape:
    """One decoder-only transformer. ``ffn_hidden`` is the width of each input projection of a
    gated FFN (SwiGLU) when ``gated_ffn``; ``tied_embeddings``: the logits reuse the input
    embedding (the file's key, else the rule of the presets: GPT-style tied, Llama-style gated
    FFN untied); ``params_b`` the source's parameter count in billions (often rounded or
    nominal), ``None`` where it gives none."""

    name: str
    aliases: tuple[str, ...]
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    gated_ffn: bool
    tied_embeddings: bool
    seq_len: int
    vocab: int
    params_b: float | None
    notes: str
    source: Source
    sources: dict[str, Source]
    experts: int = 0  # routed experts per layer (0: dense)
    top_k: int = 0
    moe_ffn_hidden: int = 0
    head_dim: int = 0  # width of one attention head (the file's, else hidden / heads)
    shared_ffn_hidden: int = 0  # the shared experts' FFN width (0: none)
    dense_layers: tuple[int, ...] = ()  # the dense layers among the MoE layers (indices)
    kv_lora_rank: int = 0  # latent attention (0: ordinary attention)
    q_lora_rank: int = 0
    rope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_layers: int = 0

    def source_of(self, field: str) -> Source:
        """Where ``field`` (a shape key) comes from: its own source, else the preset's."""
        return self.sources.get(field, self.source)


def _parse(entry: dict[str, object], index: int) -> ModelShape:
    name = entry.get("name")
    where = f"{_PATH}, model {name if isinstance(name, str) else index!r}"
    f = Fields(entry, where)
    source = parse_source(
        {"url": entry.get("source"), "date": entry.get("date"), "where": entry.get("where", "")},
        where,
    )
    hidden, heads = f.integer("hidden"), f.integer("heads")
    kv_heads = f.integer("kv_heads", default=heads)
    head_dim = f.optional_integer("head_dim") or 0
    if hidden % heads and not head_dim:
        raise CatalogError(f"{where}: hidden {hidden} is not a multiple of heads {heads}")
    if heads % kv_heads:
        raise CatalogError(f"{where}: heads {heads} is not a multiple of kv_heads {kv_heads}")
    overrides = entry.get("sources")
    gated = f.flag("gated_ffn", default=False)
    return ModelShape(
        name=f.text("name"),
        aliases=f.texts("aliases"),
        layers=f.integer("layers"),
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        ffn_hidden=f.integer("ffn_hidden", default=4 * hidden),
        gated_ffn=gated,
        tied_embeddings=f.flag("tied_embeddings", default=not gated),
        seq_len=f.integer("seq_len"),
        vocab=f.integer("vocab"),
        params_b=f.optional_number("params_b"),
        notes=f.text("notes", default=""),
        source=source,
        sources={}
        if overrides is None
        else parse_sources(overrides, where, SHAPE_KEYS + MOE_KEYS, has_default=True),
        experts=f.optional_integer("experts") or 0,
        top_k=f.optional_integer("top_k") or 0,
        moe_ffn_hidden=f.optional_integer("moe_ffn_hidden") or 0,
        head_dim=head_dim or hidden // heads,
        shared_ffn_hidden=f.optional_integer("shared_ffn_hidden") or 0,
        dense_layers=_dense_layers(entry.get("dense_layers", ())),
        kv_lora_rank=f.optional_integer("kv_lora_rank") or 0,
        q_lora_rank=f.optional_integer("q_lora_rank") or 0,
        rope_head_dim=f.optional_integer("rope_head_dim") or 0,
        v_head_dim=f.optional_integer("v_head_dim") or 0,
        mtp_layers=f.optional_integer("mtp_layers") or 0,
    )


def _dense_layers(value: object) -> tuple[int, ...]:
    """A preset's dense layers: a count of the first ones, or their indices (Model checks)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return tuple(range(value))
    return tuple(value) if isinstance(value, list | tuple) else ()


@cache
def _catalog() -> tuple[dict[str, ModelShape], NameIndex]:
    parsed = [_parse(e, i) for i, e in enumerate(load_entries(_PACKAGE, _FILE, "models"))]
    index = NameIndex("model preset", _PATH, ((m.name, m.aliases) for m in parsed))
    return {m.name: m for m in parsed}, index


def model(name: str) -> ModelShape:
    """The preset ``name`` (a name or alias, any case, spaces/``_``/``-`` alike).

    Raises ``CatalogError`` with the nearest known names when there is none."""
    table, index = _catalog()
    return table[index.resolve(name)]


def model_names() -> tuple[str, ...]:
    """Every preset's canonical name, in file order."""
    return _catalog()[1].names


def models() -> pl.DataFrame:
    """The preset table: one row per model with its shape, parameter count (billions, as the
    source states it) and source."""
    table, _ = _catalog()
    rows = [
        {
            "name": m.name,
            **{k: getattr(m, k) for k in SHAPE_KEYS + MOE_KEYS},
            "gated_ffn": m.gated_ffn,
            "tied_embeddings": m.tied_embeddings,
            "params_b": m.params_b,
            "aliases": list(m.aliases),
            "source_url": m.source.url,
            "source_date": m.source.date,
        }
        for m in table.values()
    ]
    return pl.DataFrame(rows, schema_overrides={"params_b": pl.Float64})
