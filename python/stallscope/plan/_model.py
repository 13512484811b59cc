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

Mixture of experts: ``experts`` (routed experts per layer; 0, the default, is a dense model),
``top_k`` (experts each token is routed to; default 2), ``moe_ffn_hidden`` (each expert's FFN
width, per input projection when gated; default ``ffn_hidden``). Every layer is an MoE layer,
its router a GEMM of h x experts. ``head_dim`` (default hidden / heads) where the attention
width heads x head_dim differs from hidden (Qwen3). Megatron's and Hugging Face's names are
read too (``num_moe_experts`` / ``num_experts`` / ``num_local_experts``, ``moe_router_topk`` /
``num_experts_per_tok``, ``moe_ffn_hidden_size`` / ``moe_intermediate_size``, ``kv_channels``).
``shared_ffn_hidden``: the width of the shared expert(s) every token passes through beside the
routed ones (a dense FFN per input projection; 0, the default: none), read from Megatron's
``moe_shared_expert_intermediate_size``, Hugging Face's ``shared_expert_intermediate_size``
(Qwen2-MoE) or ``n_shared_experts`` x ``moe_intermediate_size`` (DeepSeek). ``dense_layers``:
the layers with a dense FFN of ``ffn_hidden`` instead (their 0-based indices, or a count n for
the first n), read from Hugging Face's ``first_k_dense_replace`` (DeepSeek, GLM-4.5, Kimi K2),
``mlp_only_layers`` and ``decoder_sparse_step`` (Qwen2-MoE), ``interleave_moe_layer_step``
(Llama 4) and Megatron's ``moe_layer_freq``; every other layer is an MoE layer.

Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): ``kv_lora_rank`` (the compressed K/V
width; 0, the default: ordinary attention), ``q_lora_rank`` (the compressed Q width; 0: Q
projected from the hidden state directly), ``rope_head_dim`` (each head's rotary part of Q and
K, beside ``head_dim``, its non-rotary part) and ``v_head_dim`` (default ``head_dim``); read
from Hugging Face's ``qk_nope_head_dim`` / ``qk_rope_head_dim`` and Megatron's
``qk_head_dim`` / ``qk_pos_emb_head_dim`` too. Every head has its own K and V (no grouping).
``mtp_layers``: multi-token prediction modules after the last layer (Hugging Face's
``num_nextn_predict_layers``, Megatron's ``mtp_num_layers``; default 0), each a layer of the
model's kind fed by the hidden state and the next token's embedding, with its own loss.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Final

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
    "num_moe_experts": "experts",
    "num_experts": "experts",
    "num_local_experts": "experts",
    "moe_router_topk": "top_k",
    "num_experts_per_tok": "top_k",
    "moe_ffn_hidden_size": "moe_ffn_hidden",
    "moe_intermediate_size": "moe_ffn_hidden",
    "n_routed_experts": "experts",
    "kv_channels": "head_dim",
    "moe_shared_expert_intermediate_size": "shared_ffn_hidden",
    "shared_expert_intermediate_size": "shared_ffn_hidden",
    "num_nextn_predict_layers": "mtp_layers",
    "mtp_num_layers": "mtp_layers",
    "qk_nope_head_dim": "head_dim",
    "qk_head_dim": "head_dim",
    "qk_rope_head_dim": "rope_head_dim",
    "qk_pos_emb_head_dim": "rope_head_dim",
    "first_k_dense_replace": "dense_layers",
    "mlp_only_layers": "dense_layers",
}
#: Latent attention's keys besides kv_lora_rank.
_MLA_KEYS = ("kv_lora_rank", "q_lora_rank", "rope_head_dim", "v_head_dim")
#: Keys of a layer pattern that set ``dense_layers`` (``_dense_pattern``).
_PATTERN_KEYS = frozenset({"decoder_sparse_step", "interleave_moe_layer_step", "moe_layer_freq"})
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
    experts: int = 0  # routed experts per layer (0: a dense FFN)
    top_k: int = 0  # experts per token (0: 2 when experts, else unused)
    moe_ffn_hidden: int = 0  # each expert's FFN width (0: ffn_hidden)
    head_dim: int = 0  # width of one attention head (0: hidden / heads)
    shared_ffn_hidden: int = 0  # the shared expert(s)' FFN width beside the routed ones
    #: the layers (0-based) with a dense FFN among the MoE layers (given as a count n: the
    #: first n; a list in a model file)
    dense_layers: tuple[int, ...] = ()
    kv_lora_rank: int = 0  # latent attention: the compressed K/V width (0: ordinary attention)
    q_lora_rank: int = 0  # latent attention: the compressed Q width (0: Q from h directly)
    rope_head_dim: int = 0  # latent attention: each head's rotary Q/K part, beside head_dim
    v_head_dim: int = 0  # latent attention: each head's V width (0: head_dim)
    mtp_layers: int = 0  # multi-token prediction modules after the last layer (DeepSeek-V3)

    def __post_init__(self) -> None:
        for key in (
            "experts",
            "top_k",
            "moe_ffn_hidden",
            "head_dim",
            "shared_ffn_hidden",
            "mtp_layers",
            *_MLA_KEYS,
        ):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise PlanError(
                    f"model {self.name!r}: {key} must be a non-negative integer, got {v!r}"
                )
        for key in ("layers", "hidden", "heads", "seq_len", "vocab"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise PlanError(f"model {self.name!r}: {key} must be a positive integer, got {v!r}")
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.experts:
            if self.top_k == 0:
                object.__setattr__(self, "top_k", 2)
            if self.moe_ffn_hidden == 0:
                object.__setattr__(self, "moe_ffn_hidden", self.ffn_hidden)
            if self.top_k > self.experts:
                raise PlanError(
                    f"model {self.name!r}: top_k ({self.top_k}) exceeds experts "
                    f"({self.experts}): each token goes to top_k distinct experts"
                )
        elif self.top_k or self.moe_ffn_hidden or self.shared_ffn_hidden:
            raise PlanError(
                f"model {self.name!r}: top_k, moe_ffn_hidden and shared_ffn_hidden describe "
                "experts, but experts is 0: give experts (the routed experts per layer) or drop "
                "them"
            )
        if self.head_dim == 0 and self.hidden % self.heads:
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

        if self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if not self.kv_lora_rank and any(getattr(self, k) for k in _MLA_KEYS):
            raise PlanError(
                f"model {self.name!r}: q_lora_rank, rope_head_dim and v_head_dim describe "
                "latent attention, but kv_lora_rank is 0: give kv_lora_rank or drop them"
            )
        if self.kv_lora_rank and self.kv_heads != self.heads:
            raise PlanError(
                f"model {self.name!r}: latent attention gives every head its own K and V: "
                f"kv_heads ({self.kv_heads}) must equal heads ({self.heads}) or be left out"
            )
        if self.kv_lora_rank and not self.v_head_dim:
            object.__setattr__(self, "v_head_dim", self.head_dim)
        object.__setattr__(self, "dense_layers", self._dense_layers())

    def _dense_layers(self) -> tuple[int, ...]:
        d: object = self.dense_layers
        if isinstance(d, bool) or not isinstance(d, int | list | tuple):
            raise PlanError(
                f"model {self.name!r}: dense_layers must be a count (the first n layers) or a "
                f"list of layer indices, got {d!r}"
            )
        if isinstance(d, int):
            if not 0 <= d <= self.layers:
                raise PlanError(
                    f"model {self.name!r}: dense_layers {d} must be a count from 0 to the "
                    f"{self.layers} layers"
                )
            d = tuple(range(d))
        bad = [i for i in d if isinstance(i, bool) or not isinstance(i, int)]
        bad += [i for i in d if isinstance(i, int) and not 0 <= i < self.layers]
        if bad or len(set(d)) != len(d):
            raise PlanError(
                f"model {self.name!r}: dense_layers must list distinct layer indices from 0 to "
                f"{self.layers - 1}, got {list(d)!r}"
            )
        if d and not self.moe:
            raise PlanError(
                f"model {self.name!r}: dense_layers marks layers of a mixture of experts as "
                "dense, but experts is 0: give experts or drop dense_layers"
            )
        if d and len(d) == self.layers:
            raise PlanError(
                f"model {self.name!r}: every layer is in dense_layers: drop experts (a dense "
                "model) or list fewer dense layers"
            )
        return tuple(sorted(d))

    def dense_model(self) -> Model:
        """The model's dense layers as a model of their own: the same attention with a dense FFN
        of ``ffn_hidden`` (the model itself when it is dense)."""
        if not self.moe:
            return self
        return replace(
            self,
            experts=0,
            top_k=0,
            moe_ffn_hidden=0,
            shared_ffn_hidden=0,
            dense_layers=(),
            mtp_layers=0,
        )

    @property
    def moe_layers(self) -> int:
        """How many layers are MoE layers (0 for a dense model)."""
        return self.layers - len(self.dense_layers) if self.moe else 0

    @property
    def moe(self) -> bool:
        """Whether the FFN is a mixture of experts."""
        return self.experts > 0

    @property
    def mla(self) -> bool:
        """Whether attention is multi-head latent attention (compressed K and V)."""
        return self.kv_lora_rank > 0

    @property
    def q_hidden(self) -> int:
        """Width of Q: heads x head_dim (hidden unless the model sets head_dim), with latent
        attention heads x (head_dim + rope_head_dim)."""
        return self.heads * (self.head_dim + self.rope_head_dim)

    @property
    def o_hidden(self) -> int:
        """Width of the attention's output (the output projection's input): q_hidden, with
        latent attention heads x v_head_dim."""
        return self.heads * self.v_head_dim if self.mla else self.q_hidden

    @property
    def kv_hidden(self) -> int:
        """Width of K (and of V): kv_heads x head_dim; with latent attention the mean of K's
        (heads x (head_dim + rope_head_dim)) and V's (heads x v_head_dim), K and V together
        being twice it."""
        if self.mla:
            return (self.q_hidden + self.o_hidden) // 2
        return self.kv_heads * self.head_dim

    @property
    def attention_head_dim(self) -> int:
        """The head width an attention kernel of the same FLOPs runs: head_dim, with latent
        attention the mean of the Q/K (head_dim + rope_head_dim) and V widths."""
        return self.kv_hidden // self.heads if self.mla else self.head_dim

    def latent_gemms(self, tokens: int, local: int, tp: int) -> list[tuple[int, int, int]]:
        """Latent attention's Q, K and V projections as (m, k, n) GEMMs on one GPU: the
        down-projections of its ``local`` tokens (its sequence-parallel share) to the
        compressed widths (whole on every tensor-parallel rank, as Megatron-Core builds
        them), the up-projections of all ``tokens`` to this GPU's heads."""
        h, heads = self.hidden, self.heads // tp
        out = []
        if self.q_lora_rank:
            out += [(local, h, self.q_lora_rank)]
            out += [(tokens, self.q_lora_rank, heads * (self.head_dim + self.rope_head_dim))]
        else:
            out += [(tokens, h, heads * (self.head_dim + self.rope_head_dim))]
        out += [(local, h, self.kv_lora_rank + self.rope_head_dim)]
        out += [(tokens, self.kv_lora_rank, heads * (self.head_dim + self.v_head_dim))]
        return out

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices of one FFN (or expert): three when gated, else two."""
        return 3 if self.gated_ffn else 2

    def attention_params(self) -> int:
        """Q, K, V and the output projection of one layer (latent attention: its down- and
        up-projections)."""
        h = self.hidden
        if self.mla:
            return sum(k * n for _, k, n in self.latent_gemms(1, 1, 1)) + self.o_hidden * h
        return h * (self.q_hidden + 2 * self.kv_hidden) + self.q_hidden * h

    def expert_params(self) -> int:
        """All routed experts' weights of one layer (0 for a dense model)."""
        return self.experts * self.ffn_matrices * self.hidden * self.moe_ffn_hidden

    def dense_layer_params(self) -> int:
        """One layer's weights outside the routed experts: attention, the dense FFN (the
        router and the shared experts instead for an MoE layer) and the two norms' scale and
        shift."""
        h = self.hidden
        if self.moe:
            ffn = h * self.experts + self.ffn_matrices * h * self.shared_ffn_hidden
        else:
            ffn = self.ffn_matrices * h * self.ffn_hidden
        return self.attention_params() + ffn + 4 * h + self.q_lora_rank + self.kv_lora_rank

    def layer_params(self) -> int:
        """Weights of one transformer layer (no biases): Q, K, V, output projection, FFN (every
        expert and the router for an MoE layer), and the two norms' scale and shift."""
        return self.dense_layer_params() + self.expert_params()

    def active_ffn_width(self) -> int:
        """FFN width one token passes through: ffn_hidden, or top_k experts' widths and the
        shared experts'."""
        if self.moe:
            return self.top_k * self.moe_ffn_hidden + self.shared_ffn_hidden
        return self.ffn_hidden

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def mtp_params(self) -> int:
        """One multi-token prediction module's own weights: a layer of the model's kind (an MoE
        layer when the model has experts), the projection of the joined hidden state and
        embedding (2h x h) and its three norms; it shares the embedding and the output layer."""
        h = self.hidden
        return self.layer_params() + 2 * h * h + 3 * h

    def params(self) -> int:
        """All weights: layers, input embedding, the output layer unless tied, the final norm,
        the multi-token prediction modules."""
        out = 0 if self.tied_embeddings else self.embedding_params()
        dense = len(self.dense_layers)  # dense layers among MoE ones
        body = (self.layers - dense) * self.layer_params() + self.mtp_layers * self.mtp_params()
        if dense:
            body += dense * self.dense_model().layer_params()
        return body + self.embedding_params() + out + 2 * self.hidden

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["dense_layers"] = list(self.dense_layers)
        return out


def model_from_dict(doc: Mapping[str, Any], name: str = "custom") -> Model:
    """A Model from the keys of a model file (the planner's, Megatron's or Hugging Face's)."""
    known = {f.name for f in fields(Model)}
    hf = "model_type" in doc or "architectures" in doc
    kw: dict[str, Any] = {"name": str(doc.get("name", name))}
    unknown: list[str] = []
    for key, value in doc.items():
        k = _ALIASES.get(key, key)
        if value is None and hf:  # a key the config leaves unset (q_lora_rank: null)
            continue
        if k == "untied":  # Megatron's flag says the opposite of ours
            k, value = "tied_embeddings", not value
        if k in known:
            if k != "name":
                kw.setdefault(k, value)
        elif key not in _INFORMATIVE and key not in _PATTERN_KEYS and not hf:
            unknown.append(key)
    if unknown:
        hints = "; ".join(
            f"{u!r}: did you mean {listed(nearest_names(u, known, 2))}?" for u in unknown
        )
        raise PlanError(f"model {kw['name']!r}: unknown keys {hints}")
    if hf and _hf_gated(doc):
        kw.setdefault("gated_ffn", True)
    _dense_pattern(doc, kw)
    shared = doc.get("n_shared_experts")
    if hf and isinstance(shared, int) and shared > 0 and isinstance(kw.get("moe_ffn_hidden"), int):
        # DeepSeek counts its shared experts, each as wide as a routed one
        kw.setdefault("shared_ffn_hidden", shared * kw["moe_ffn_hidden"])
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


#: Hugging Face model types whose MLP is gated (gate, up and down projections) whatever its
#: activation: Gemma's GeGLU (GemmaMLP, Gemma2MLP, Gemma3MLP in transformers' modeling files,
#: hidden_activation gelu_pytorch_tanh).
_HF_GATED_TYPES: Final = ("gemma", "gemma2", "gemma3", "gemma3_text")


def _hf_gated(doc: Mapping[str, Any]) -> bool:
    """Whether a Hugging Face config's MLP is gated: a SiLU (SwiGLU) activation, as Llama,
    Mistral, Qwen and DeepSeek configs name it, or a model type gated whatever its activation."""
    act = str(doc.get("hidden_act") or doc.get("hidden_activation") or "").lower()
    return act in ("silu", "swiglu", "swish") or str(doc.get("model_type", "")) in _HF_GATED_TYPES


def _dense_pattern(doc: Mapping[str, Any], kw: dict[str, Any]) -> None:
    """``dense_layers`` from the layer patterns of Hugging Face's and Megatron's configs: MoE
    every n-th layer (``decoder_sparse_step``, ``interleave_moe_layer_step``: layers n-1,
    2n-1, ...; ``moe_layer_freq`` n: layers 0, n, 2n, ...; a list: 1 for an MoE layer); the
    dense ones of those joined with ``dense_layers`` (``mlp_only_layers``)."""
    layers = kw.get("layers")
    if not isinstance(layers, int) or not kw.get("experts"):
        return
    moe: set[int] | None = None
    for key in ("decoder_sparse_step", "interleave_moe_layer_step"):
        n = doc.get(key)
        if isinstance(n, int) and not isinstance(n, bool) and n > 1:
            moe = {i for i in range(layers) if (i + 1) % n == 0}
    freq = doc.get("moe_layer_freq")
    if isinstance(freq, int) and not isinstance(freq, bool) and freq > 1:
        moe = {i for i in range(layers) if i % freq == 0}
    elif isinstance(freq, list) and len(freq) == layers:
        moe = {i for i, x in enumerate(freq) if x}
    if moe is None:
        return
    given = kw.get("dense_layers", ())
    listed_ = tuple(range(given)) if isinstance(given, int) else tuple(given)
    kw["dense_layers"] = tuple(sorted(set(listed_) | (set(range(layers)) - moe)))


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
        experts=p.experts,
        top_k=p.top_k,
        moe_ffn_hidden=p.moe_ffn_hidden,
        head_dim=p.head_dim,
        shared_ffn_hidden=p.shared_ffn_hidden,
        dense_layers=p.dense_layers,
        kv_lora_rank=p.kv_lora_rank,
        q_lora_rank=p.q_lora_rank,
        rope_head_dim=p.rope_head_dim,
        v_head_dim=p.v_head_dim,
        mtp_layers=p.mtp_layers,
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
