"""The workload's shape: a decoder-only transformer, from a JSON file, a dict or a preset name.

Keys (the planner's own): ``layers, hidden, heads, seq_len, vocab`` (required), ``ffn_hidden``
(default 4 x hidden), ``kv_heads`` (grouped-query attention; default ``heads``), ``gated_ffn``
(SwiGLU: three FFN matrices instead of two; default false), ``flash_attention`` (default true:
the s x s scores are never stored), ``dropout`` (default false), ``tied_embeddings`` (the
logits reuse the input embedding; default true), ``name``. Megatron's argument names and a
Hugging Face ``config.json`` are read too (``num_layers`` / ``num_hidden_layers``,
``hidden_size``, ``num_attention_heads``, ``num_key_value_heads`` / ``num_query_groups``,
``ffn_hidden_size`` / ``intermediate_size``, ``seq_length`` / ``max_position_embeddings``,
``vocab_size`` / ``padded_vocab_size``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from stallscope.plan._errors import PlanError, listed, nearest_names

_ALIASES: dict[str, str] = {
    "num_layers": "layers",
    "num_hidden_layers": "layers",
    "n_layer": "layers",
    "hidden_size": "hidden",
    "d_model": "hidden",
    "n_embd": "hidden",
    "num_attention_heads": "heads",
    "n_head": "heads",
    "num_key_value_heads": "kv_heads",
    "num_query_groups": "kv_heads",
    "ffn_hidden_size": "ffn_hidden",
    "intermediate_size": "ffn_hidden",
    "seq_length": "seq_len",
    "max_position_embeddings": "seq_len",
    "vocab_size": "vocab",
    "padded_vocab_size": "vocab",
    "swiglu": "gated_ffn",
    "tie_word_embeddings": "tied_embeddings",
    "untie_embeddings_and_output_weights": "untied",
}
#: Keys a model file may carry that the planner does not use.
_INFORMATIVE = frozenset(
    {
        "source",
        "sources",
        "notes",
        "note",
        "params",
        "params_b",
        "family",
        "date",
        "where",
        "aliases",
    }
)


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer's shape (the planner's workload)."""

    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    ffn_hidden: int = 0  # 0: 4 x hidden
    kv_heads: int = 0  # 0: heads (multi-head attention)
    gated_ffn: bool = False
    flash_attention: bool = True
    dropout: bool = False
    tied_embeddings: bool = True
    name: str = "custom"

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "seq_len", "vocab"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise PlanError(f"model {self.name!r}: {key} must be a positive integer, got {v!r}")
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.hidden % self.heads:
            raise PlanError(
                f"model {self.name!r}: hidden ({self.hidden}) is not a multiple of heads "
                f"({self.heads}); use a head count that divides it"
            )
        if self.heads % self.kv_heads:
            raise PlanError(
                f"model {self.name!r}: heads ({self.heads}) is not a multiple of kv_heads "
                f"({self.kv_heads}); grouped-query attention shares each K/V head among a "
                "whole number of query heads"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_hidden(self) -> int:
        """Width of K (and of V): kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        """Weights of one transformer layer (no biases): Q, K, V, output projection, FFN, and
        the two norms' scale and shift."""
        h = self.hidden
        attn = h * (h + 2 * self.kv_hidden) + h * h
        ffn = (3 if self.gated_ffn else 2) * h * self.ffn_hidden
        return attn + ffn + 4 * h

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def params(self) -> int:
        """All weights: layers, input embedding, the output layer unless tied, the final norm."""
        out = 0 if self.tied_embeddings else self.embedding_params()
        return self.layers * self.layer_params() + self.embedding_params() + out + 2 * self.hidden

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def model_from_dict(doc: Mapping[str, Any], name: str = "custom") -> Model:
    """A Model from the keys of a model file (the planner's, Megatron's or Hugging Face's)."""
    known = {f.name for f in fields(Model)}
    hf = "model_type" in doc or "architectures" in doc
    kw: dict[str, Any] = {"name": str(doc.get("name", name))}
    unknown: list[str] = []
    for key, value in doc.items():
        k = _ALIASES.get(key, key)
        if k == "untied":  # Megatron's flag says the opposite of ours
            k, value = "tied_embeddings", not value
        if k in known:
            if k != "name":
                kw.setdefault(k, value)
        elif key not in _INFORMATIVE and not hf:
            unknown.append(key)
    if unknown:
        hints = "; ".join(
            f"{u!r}: did you mean {listed(nearest_names(u, known, 2))}?" for u in unknown
        )
        raise PlanError(f"model {kw['name']!r}: unknown keys {hints}")
    if hf and str(doc.get("hidden_act", "")).lower() in ("silu", "swiglu"):
        kw.setdefault("gated_ffn", True)
    missing = [k for k in ("layers", "hidden", "heads", "seq_len", "vocab") if k not in kw]
    if missing:
        raise PlanError(
            f"model {kw['name']!r} lacks {listed(missing)}: a model file needs layers, hidden, "
            'heads, seq_len and vocab, e.g. {"layers": 96, "hidden": 12288, "heads": 96, '
            '"seq_len": 2048, "vocab": 51200}'
        )
    for k in ("gated_ffn", "flash_attention", "dropout", "tied_embeddings"):
        if k in kw and not isinstance(kw[k], bool):
            raise PlanError(f"model {kw['name']!r}: {k} must be true or false, got {kw[k]!r}")
    return Model(**kw)


def load_model(source: Model | Mapping[str, Any] | str | Path) -> Model:
    """A Model from a Model, a dict, a JSON file's path or a preset's name."""
    if isinstance(source, Model):
        return source
    if isinstance(source, Mapping):
        return model_from_dict(source)
    path = Path(source)
    if path.suffix == ".json" or path.exists():
        return model_from_dict(_read_json(path, "model"), name=path.stem)
    return model_of_preset(str(source))


def model_of_preset(name: str) -> Model:
    """The Model of a model preset (``stallscope.plan.model(name)``, with its sources)."""
    from stallscope.plan._presets import model
    from stallscope.predict import CatalogError

    try:
        p = model(name)
    except CatalogError as e:
        raise PlanError(f"{e}; or give a model JSON file") from None
    return Model(
        layers=p.layers,
        hidden=p.hidden,
        heads=p.heads,
        seq_len=p.seq_len,
        vocab=p.vocab,
        ffn_hidden=p.ffn_hidden,
        kv_heads=p.kv_heads,
        gated_ffn=p.gated_ffn,
        tied_embeddings=p.tied_embeddings,
        name=p.name,
    )


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(
            f"{what} file {path} does not exist: give a JSON file or a preset name"
        ) from None
    except (OSError, ValueError) as e:
        raise PlanError(f"{what} file {path} is not readable JSON ({e}): fix the file") from None
    if not isinstance(doc, dict):
        raise PlanError(f"{what} file {path} must hold one JSON object, got {type(doc).__name__}")
    return doc
