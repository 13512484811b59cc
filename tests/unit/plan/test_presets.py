"""Model presets: every shape sourced and dated, shapes consistent with the parameter counts the
sources state, Llama FFN widths following Meta's sizing rule, names resolving."""

from __future__ import annotations

import math
import re

import polars as pl
import pytest

from stallscope.plan import SHAPE_KEYS, model, model_names, models
from stallscope.plan._presets import _parse
from stallscope.predict import CatalogError
from stallscope.predict._catalog import Fields
from tests.unit.plan.conftest import param_count

DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
REQUIRED = {
    "gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b",
    "llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "megatron-22b", "megatron-530b",
    "megatron-1t",
}  # fmt: skip


def test_every_asked_for_preset_is_there() -> None:
    assert set(model_names()) >= REQUIRED
    assert len([n for n in model_names() if n.startswith("gpt3-")]) >= 4


@pytest.mark.parametrize("name", model_names())
def test_every_shape_is_sourced_and_dated(name: str) -> None:
    m = model(name)
    for key in SHAPE_KEYS:
        src = m.source_of(key)
        assert src.url.startswith("https://") and DATE.match(src.date), (name, key)
    assert m.hidden % m.heads == 0 and m.heads % m.kv_heads == 0
    assert 64 <= m.head_dim <= 256
    assert m.ffn_hidden >= 2 * m.hidden
    # Vocabularies up to 2^18: BLOOM's 250,680, Nemotron-4's 256,000.
    assert 2048 <= m.seq_len <= 131072 and 30000 <= m.vocab <= 262144


def _significant_digits(x: float) -> int:
    return len(f"{x:g}".replace(".", "").lstrip("0"))


@pytest.mark.parametrize("name", model_names())
def test_shape_reproduces_the_stated_parameter_count(name: str) -> None:
    m = model(name)
    assert m.params_b is not None
    # A figure stated to 3+ significant digits (18.4, 529.6, 6.659) is matched to 1.5 %; a
    # nominal size (7B, 70B) to 5 %. A wrong layer count or width moves the count more.
    tol = 0.015 if _significant_digits(m.params_b) >= 3 else 0.05
    assert param_count(m) / 1e9 == pytest.approx(m.params_b, rel=tol)


@pytest.mark.parametrize(
    ("name", "multiplier", "multiple_of"),
    # Meta's arch_args (llama-models sku_list.py, and llama/model.py multiple_of 256 for the
    # Llama 2 models without a multiplier).
    [
        ("llama2-7b", None, 256),
        ("llama2-13b", None, 256),
        ("llama2-70b", 1.3, 4096),
        ("llama3-8b", 1.3, 1024),
        ("llama3-70b", 1.3, 4096),
        ("llama3.1-405b", 1.2, 4096),
    ],
)
def test_llama_ffn_width_follows_metas_rule(
    name: str, multiplier: float | None, multiple_of: int
) -> None:
    m = model(name)
    hidden = int(2 * 4 * m.hidden / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    assert m.gated_ffn and m.ffn_hidden == multiple_of * math.ceil(hidden / multiple_of)


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("GPT-3", "gpt3-175b"),
        ("gpt3", "gpt3-175b"),
        ("MT-NLG", "megatron-530b"),
        ("Llama 3.1 405B", "llama3.1-405b"),
        ("Meta-Llama-3-8B", "llama3-8b"),
        ("LLAMA2-70B", "llama2-70b"),
        ("megatron 1t", "megatron-1t"),
        ("MPT-7B", "mpt-7b"),
    ],
)
def test_aliases_resolve(alias: str, name: str) -> None:
    assert model(alias).name == name


def test_unknown_preset_lists_the_nearest() -> None:
    with pytest.raises(CatalogError, match=r"unknown model preset 'llama3-405b' \(nearest: llama3"):
        model("llama3-405b")


def test_defaults_and_gqa() -> None:
    gpt3 = model("gpt3-175b")
    assert gpt3.kv_heads == gpt3.heads and gpt3.ffn_hidden == 4 * gpt3.hidden
    assert not gpt3.gated_ffn and gpt3.tied_embeddings
    assert not model("llama3-8b").tied_embeddings  # the rule: a gated FFN, an untied output
    nemotron = model("nemotron4-15b")  # the file's key overrides the rule
    assert not nemotron.gated_ffn and not nemotron.tied_embeddings
    assert model("llama2-70b").kv_heads == 8 and model("llama2-7b").kv_heads == 32


def test_frame() -> None:
    df = models()
    assert df.height == len(model_names())
    assert set(SHAPE_KEYS) <= set(df.columns)
    assert df.schema["layers"] == pl.Int64 and df.schema["gated_ffn"] == pl.Boolean
    assert df["source_url"].str.starts_with("https://").all()


def _entry(**changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "name": "m",
        "layers": 2,
        "hidden": 128,
        "heads": 2,
        "seq_len": 64,
        "vocab": 100,
        "source": "https://example.com/m",
        "date": "2024-01-01",
    }
    entry.update(changes)
    return entry


def test_bad_presets_are_refused() -> None:
    assert _parse(_entry(), 0).ffn_hidden == 512
    with pytest.raises(CatalogError, match="hidden 129 is not a multiple of heads 2"):
        _parse(_entry(hidden=129), 0)
    with pytest.raises(CatalogError, match="heads 2 is not a multiple of kv_heads 3"):
        _parse(_entry(kv_heads=3), 0)
    with pytest.raises(CatalogError, match="source url must be an http"):
        _parse(_entry(source="the paper"), 0)
    with pytest.raises(CatalogError, match=r"field 'layers' must be a positive integer, got 2.5"):
        _parse(_entry(layers=2.5), 0)
    with pytest.raises(CatalogError, match=r"sources for unknown fields \['batch'\]"):
        _parse(_entry(sources={"batch": {"url": "https://e.com", "date": "2020"}}), 0)
    with pytest.raises(CatalogError, match="gated_ffn' must be true or false"):
        Fields({"gated_ffn": "yes"}, "x").flag("gated_ffn", default=False)
