"""Selective recompute by module (Megatron-Core's --recompute-modules): the checks, what each
module drops from the activations and recomputes in the backward, the search and the CLI."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
from stallscope.plan import Cluster, Model, PlanError, Strategy, load_model, predict_strategy
from stallscope.plan._costs import costs
from stallscope.plan._layer import gemm_fwd_bwd, layer_cost
from stallscope.plan._memory import layer_activation_bytes
from stallscope.plan._search import Space, best_strategy, search
from stallscope.plan._strategy import check

from .conftest import SMALL_GATED

DENSE: dict[str, Any] = SMALL_GATED | {"name": "dense-rc"}
#: with 16 experts of 1024 (2 per token), a shared expert of 2048 and latent attention
MOE: dict[str, Any] = DENSE | {
    "name": "moe-rc",
    "experts": 16,
    "top_k": 2,
    "moe_ffn_hidden": 1024,
    "shared_ffn_hidden": 2048,
    "kv_lora_rank": 512,
    "q_lora_rank": 768,
    "rope_head_dim": 64,
    "head_dim": 128,
}
BASE = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8)


@pytest.fixture
def dense() -> Model:
    return load_model(DENSE)


@pytest.fixture
def moe() -> Model:
    return load_model(MOE)


def _sel(*mods: str, **kw: Any) -> Strategy:
    return BASE.with_(recompute="selective", recompute_modules=mods, **kw)


def test_which_modules_are_recomputed() -> None:
    assert BASE.recomputed == frozenset()
    assert BASE.with_(recompute="selective").recomputed == {"core_attn"}
    assert _sel("layernorm", "moe_act").recomputed == {"layernorm", "moe_act"}
    assert BASE.with_(recompute="full").recomputed == frozenset()
    assert "rc-selective(layernorm+moe_act)" in _sel("layernorm", "moe_act").label()


@pytest.mark.parametrize(
    ("s", "words"),
    [
        (BASE.with_(recompute_modules=("layernorm",)), "set recompute to selective"),
        (_sel("attention"), "'attention' is not one of core_attn"),
        (_sel("moe_act"), "has no routed experts"),
        (_sel("mla_up_proj"), "has no latent attention"),
        (_sel("shared_experts"), "has no shared experts"),
    ],
)
def test_modules_a_model_lacks_are_refused(dense: Model, s: Strategy, words: str) -> None:
    with pytest.raises(PlanError, match=words):
        check(dense, s, 8)


def test_mlp_needs_a_dense_ffn(moe: Model) -> None:
    with pytest.raises(PlanError, match="has no dense FFN layer"):
        check(moe, _sel("mlp", ep=8), 8)
    check(load_model(MOE | {"dense_layers": 1}), _sel("mlp", ep=8), 8)


def test_each_module_drops_what_it_rebuilds(dense: Model, moe: Model) -> None:
    sb, h = 4096, 2048
    none = layer_activation_bytes(dense, BASE)
    # the two norms' outputs (the QKV and FFN inputs), 16 bit
    assert none - layer_activation_bytes(dense, _sel("layernorm")) == 2 * 2 * sb * h
    # the gated FFN's activation inputs (two) and its output, 16 bit
    assert none - layer_activation_bytes(dense, _sel("mlp")) == (4 + 2) * sb * 8192
    s = BASE.with_(ep=8)
    moe_none = layer_activation_bytes(moe, s)
    rows = sb * 2  # the routed copies this GPU's experts take: as many as its tokens send
    assert moe_none - layer_activation_bytes(moe, _sel("moe_act", ep=8)) == rows * 2 * 1024
    assert moe_none - layer_activation_bytes(moe, _sel("shared_experts", ep=8)) == 6 * sb * 2048
    qkv = 2 * moe.q_hidden + 4 * moe.kv_hidden
    assert moe_none - layer_activation_bytes(moe, _sel("mla_up_proj", ep=8)) == qkv * sb
    router = 2 * 4 * sb * 16
    per_row = 2 * h + 4 * 1024 + 2 * 1024 + 2 * h
    assert moe_none - layer_activation_bytes(moe, _sel("moe", ep=8)) == rows * per_row
    assert router > 0


def test_each_module_is_recomputed_in_the_backward(moe: Model, a100: Cluster) -> None:
    s = BASE.with_(ep=8)
    b0 = dict(layer_cost(moe, s, a100).b_parts)["recompute"]
    assert b0 == 0.0
    up = sum(
        gemm_fwd_bwd(a100, m_, k_, n_, "bf16")[0]
        for m_, k_, n_ in moe.latent_gemms(4096, 4096, 1)
        if k_ in (768, 512)
    )
    got = dict(layer_cost(moe, _sel("mla_up_proj", ep=8), a100).b_parts)["recompute"]
    assert got == pytest.approx(up)
    f = dict(layer_cost(moe, s, a100).f_parts)
    whole_moe = dict(layer_cost(moe, _sel("moe", ep=8), a100).b_parts)["recompute"]
    assert f["router"] + f["moe_permute"] < whole_moe < f["gemm_fc1"] + f["gemm_fc2"] + 1e-3
    # recomputing the MoE layer sends its tokens to the experts again
    assert costs(moe, _sel("moe", ep=8), a100).b_tp > costs(moe, s, a100).b_tp
    assert costs(moe, _sel("moe_act", ep=8), a100).b_tp == costs(moe, s, a100).b_tp
    slower = predict_strategy(moe, a100, _sel("layernorm", "moe_act", ep=8))
    assert slower.step_ns > predict_strategy(moe, a100, s).step_ns
    assert slower.memory.activations < predict_strategy(moe, a100, s).memory.activations


def test_the_search_tries_the_modules_with_flash_attention(dense: Model, a100: Cluster) -> None:
    space = Space(recompute_modules=("layernorm", "mlp"), zero=(1,), interleave=(1,))
    res = search(dense, a100, 8, 64, 100, space)
    assert "selective(layernorm+mlp)" in set(res.table["recompute"])
    for p, row in zip(res.best, res.table.iter_rows(named=True), strict=True):
        assert p.step_ns == pytest.approx(row["step_s"] * 1e9, rel=1e-6)
    top = best_strategy(res)
    assert top.recompute in ("none", "selective", "full")
    if top.recompute == "selective":
        assert top.recompute_modules == ("layernorm", "mlp")
    plain = search(dense, a100, 8, 64, 100, Space(zero=(1,), interleave=(1,)))
    assert "selective" not in set(plain.table["recompute"])  # flash: nothing to recompute


def test_predict_cli_takes_the_modules() -> None:
    r = CliRunner().invoke(
        cli,
        ["predict", "--model", "qwen3-30b-a3b", "--system", "dgx-h100", "--nodes", "1",
         "--ep", "8", "--global-batch", "64", "--recompute-modules", "moe_act,layernorm"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "rc-selective(moe_act+layernorm)" in r.output
    r = CliRunner().invoke(
        cli,
        ["predict", "--model", "llama3-8b", "--system", "dgx-h100", "--nodes", "1",
         "--global-batch", "64", "--recompute-modules", "moe"],
    )  # fmt: skip
    assert r.exit_code == 1 and "has no routed experts" in r.output
