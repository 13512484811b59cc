"""Dense FFN layers among the MoE layers (DeepSeek's and GLM-4.5's first layers, Llama 4's every
other one): the layer patterns of the config files, parameters and FLOPs, where the pipeline
places each kind, the step of a mix, memory, and the search."""

from __future__ import annotations

from typing import Any

import pytest

from stallscope.plan import Cluster, Model, PlanError, Strategy, load_model, predict_strategy
from stallscope.plan._costs import layer_flops, model_flops
from stallscope.plan._layer_mix import chunk_dense_layers
from stallscope.plan._memory import memory, stage_expert_params, stage_params
from stallscope.plan._schedule import in_flight_counts
from stallscope.plan._search import Space, search
from tests.unit.plan.conftest import SMALL_MOE

#: A small MoE in the planner's keys: 8 layers of 16 experts (2 per token), dense FFN 8192.
MOE: dict[str, Any] = SMALL_MOE | {"name": "mix-test"}
#: Hugging Face's way of saying the same with three dense layers first (DeepSeek, GLM-4.5)
HF: dict[str, Any] = {
    "model_type": "deepseek_v3",
    "num_hidden_layers": 8,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 8192,
    "moe_intermediate_size": 1024,
    "n_routed_experts": 16,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 3,
    "max_position_embeddings": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}


@pytest.fixture
def moe() -> Model:
    return load_model(MOE)


@pytest.fixture
def mixed() -> Model:
    return load_model(MOE | {"name": "mixed", "dense_layers": 3})


@pytest.mark.parametrize(
    ("doc", "dense"),
    [
        (HF, (0, 1, 2)),
        (HF | {"first_k_dense_replace": 0}, ()),
        (
            {k: v for k, v in HF.items() if k != "first_k_dense_replace"}
            | {"mlp_only_layers": [0, 5]},
            (0, 5),
        ),
        (HF | {"first_k_dense_replace": 0, "decoder_sparse_step": 2}, (0, 2, 4, 6)),  # Qwen2-MoE
        (
            HF | {"first_k_dense_replace": 0, "interleave_moe_layer_step": 2},
            (0, 2, 4, 6),
        ),  # Llama 4
        (MOE | {"moe_layer_freq": 2}, (1, 3, 5, 7)),  # Megatron: MoE at 0, 2, 4, 6
        (MOE | {"moe_layer_freq": [0, 0, 1, 1, 1, 1, 1, 1]}, (0, 1)),
        (MOE | {"dense_layers": [7, 0]}, (0, 7)),
        (MOE | {"dense_layers": 2}, (0, 1)),
    ],
)
def test_layer_patterns_give_the_dense_layers(doc: dict[str, Any], dense: tuple[int, ...]) -> None:
    m = load_model(doc)
    assert m.dense_layers == dense
    assert m.moe_layers == 8 - len(dense)
    assert m.to_dict()["dense_layers"] == list(dense)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"dense_layers": [8]}, "distinct layer indices from 0 to 7"),
        ({"dense_layers": [1, 1]}, "distinct layer indices"),
        ({"dense_layers": 9}, "a count from 0 to the 8 layers"),
        ({"dense_layers": 8}, "every layer is in dense_layers"),
        ({"dense_layers": "first"}, "a count .* or a list"),
        ({"experts": 0, "top_k": 0, "moe_ffn_hidden": 0, "dense_layers": 2}, "experts is 0"),
    ],
)
def test_bad_dense_layers_are_refused(change: dict[str, Any], words: str) -> None:
    with pytest.raises(PlanError, match=words):
        load_model(MOE | change)


def test_params_and_flops_count_each_kind(moe: Model, mixed: Model) -> None:
    dense = mixed.dense_model()
    assert not dense.moe and dense.ffn_hidden == 8192 and dense.layers == 8
    body = 5 * moe.layer_params() + 3 * dense.layer_params()
    assert mixed.params() == body + 2 * moe.embedding_params() + 2 * moe.hidden
    assert model_flops(mixed, 1) - model_flops(moe, 1) == pytest.approx(
        3 * 3 * (layer_flops(dense, 1) - layer_flops(moe, 1))
    )


def test_megatron_places_the_dense_layers_chunk_by_chunk(mixed: Model) -> None:
    s = Strategy(tp=1, pp=2, dp=4, micro_batch=1, global_batch=16)
    assert chunk_dense_layers(mixed, s) == ((3,), (0,))  # layers 0-3 on stage 0, 4-7 on 1
    # interleaved: model chunk v x pp + p; chunk (0, 0) holds 0-1, (1, 0) 2-3, (0, 1) 4-5
    assert chunk_dense_layers(mixed, s.with_(interleave=2)) == ((2, 0), (1, 0))
    assert chunk_dense_layers(load_model(MOE), s) == ()


def test_a_mix_times_between_its_two_kinds(moe: Model, mixed: Model, a100: Cluster) -> None:
    s = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, ep=8, zero=1)
    all_moe = load_model(MOE | {"name": "all-moe"})
    all_dense = moe.dense_model()
    p_moe = predict_strategy(all_moe, a100, s)
    p_dense = predict_strategy(all_dense, a100, s.with_(ep=1))
    p_mix = predict_strategy(mixed, a100, s)
    lo, hi = sorted((p_moe.step_ns, p_dense.step_ns))
    assert lo < p_mix.step_ns < hi
    # one stage: each layer's tasks add up, so the mix lands 3/8 of the way
    want = p_moe.step_ns + 3 / 8 * (p_dense.step_ns - p_moe.step_ns)
    assert p_mix.step_ns == pytest.approx(want, rel=0.02)
    parts = p_mix.parts()
    assert parts["seconds"].sum() == pytest.approx(p_mix.step_ns * 1e-9, rel=1e-6)


def test_the_stage_with_the_dense_layers_is_lighter(mixed: Model, a100: Cluster) -> None:
    s = Strategy(tp=1, pp=2, dp=4, micro_batch=1, global_batch=16, ep=4, zero=1)
    front = predict_strategy(mixed, a100, s)
    back = predict_strategy(load_model(MOE | {"dense_layers": [5, 6, 7]}), a100, s)
    assert front.step_ns != back.step_ns  # the same layers, placed on other stages
    infl = in_flight_counts(2, s.micro_batches, 1)
    m = memory(mixed, s, 80e9, infl, every_stage=True)
    assert m.stage == 0  # the embedding, and three dense FFNs where stage 1 has experts
    # stage 0: layers 0-3, three of them dense, each kind's weights in 16 bit
    p = stage_params(mixed, s, 0, 1) + 3 * mixed.dense_model().layer_params()
    assert m.weights == pytest.approx((p + stage_expert_params(mixed, s, 1)) * s.weight_bytes)


def test_the_search_times_the_mix_as_a_single_prediction(mixed: Model, a100: Cluster) -> None:
    space = Space(precision="bf16", zero=(1,), interleave=(1, 2), micro_batches=(1,))
    res = search(mixed, a100, 16, 64, 5, space)
    assert res.best
    for p, row in zip(res.best, res.table.iter_rows(named=True), strict=True):
        assert p.step_ns == pytest.approx(row["step_s"] * 1e9, rel=1e-6)
        assert sum(p.columns().values()) == p.step_ns


def test_tp_must_divide_the_dense_layers_ffn() -> None:
    from stallscope.plan._strategy import check

    odd = load_model(MOE | {"ffn_hidden": 8190, "dense_layers": 1})
    s = Strategy(tp=4, pp=1, dp=2, micro_batch=1, global_batch=2, sequence_parallel=True)
    with pytest.raises(PlanError, match=r"tp=4 does not divide ffn_hidden \(8190\)"):
        check(odd, s, 8)
    check(load_model(MOE | {"ffn_hidden": 8190}), s, 8)  # no dense layer: ffn_hidden unused
