"""Mixture-of-experts models: their shape, the expert-parallel split and its checks, the routed
experts' compute, the all-to-all token dispatcher, memory and the search."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
from stallscope.plan import Cluster, Model, PlanError, Strategy, load_model, predict_strategy
from stallscope.plan._comm import all_to_all_s
from stallscope.plan._costs import costs, layer_flops
from stallscope.plan._layer import layer_cost
from stallscope.plan._layout import Placement, layout
from stallscope.plan._memory import memory
from stallscope.plan._schedule import in_flight_counts
from stallscope.plan._search import Space, search
from stallscope.plan._strategy import check

#: Qwen3-30B-A3B's shape as its Hugging Face config.json gives it (Qwen/Qwen3-30B-A3B): 128
#: experts of width 768, 8 per token, 32 query heads of 128 on a 2048 hidden.
QWEN3_30B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "num_hidden_layers": 48,
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "max_position_embeddings": 4096,
    "vocab_size": 151936,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}
#: Mixtral 8x7B in the planner's own keys: Mistral 7B's layers with 8 experts, 2 per token.
MIXTRAL: dict[str, Any] = {
    "name": "mixtral-test",
    "layers": 32,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 8,
    "ffn_hidden": 14336,
    "gated_ffn": True,
    "tied_embeddings": False,
    "experts": 8,
    "top_k": 2,
    "seq_len": 4096,
    "vocab": 32000,
}

#: Mixtral's layers with one dense FFN of an expert's width
DENSE: dict[str, Any] = {k: v for k, v in MIXTRAL.items() if k not in ("experts", "top_k")}


@pytest.fixture
def qwen() -> Model:
    return load_model(QWEN3_30B)


@pytest.fixture
def mixtral() -> Model:
    return load_model(MIXTRAL)


def test_shapes_count_every_expert_and_the_router(qwen: Model, mixtral: Model) -> None:
    assert qwen.moe and qwen.experts == 128 and qwen.top_k == 8 and qwen.moe_ffn_hidden == 768
    assert qwen.q_hidden == 4096 and qwen.kv_hidden == 512  # head_dim 128, not 2048 / 32
    assert qwen.params() / 1e9 == pytest.approx(30.5, abs=0.1)  # Qwen's 30.5 B
    assert mixtral.moe_ffn_hidden == 14336  # the experts take ffn_hidden unless told
    assert mixtral.params() / 1e9 == pytest.approx(46.7, abs=0.1)  # Mistral AI's 46.7 B
    # a token passes through top_k experts: the active FFN is 2 x 14336 wide
    assert mixtral.active_ffn_width() == 2 * 14336


def test_a_dense_model_is_unchanged_by_the_moe_keys(small: Model) -> None:
    assert not small.moe and small.expert_params() == 0
    assert small.layer_params() == small.dense_layer_params()
    assert small.q_hidden == small.hidden and small.active_ffn_width() == small.ffn_hidden


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"top_k": 9, "experts": 8}, "top_k (9) exceeds experts (8)"),
        ({"experts": 0, "top_k": 2}, "experts is 0"),
        ({"experts": -1}, "experts must be a non-negative integer"),
    ],
)
def test_bad_expert_keys_are_refused(change: dict[str, Any], words: str) -> None:
    with pytest.raises(PlanError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_model(MIXTRAL | change)


def test_the_expert_split_is_checked_with_the_fix(mixtral: Model, small: Model) -> None:
    base = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8)
    check(mixtral, base.with_(ep=8), 8)
    with pytest.raises(PlanError, match=r"ep=3 does not divide the 8 experts.*nearest valid ep"):
        check(mixtral, base.with_(ep=3), 8)
    with pytest.raises(PlanError, match=r"ep x etp = 8 x 2 = 16 must divide tp x cp x dp = 8"):
        check(mixtral, base.with_(ep=8, etp=2), 8)
    with pytest.raises(PlanError, match="needs sequence parallelism"):
        check(mixtral, base.with_(tp=2, dp=4, ep=4), 8)
    check(mixtral, base.with_(tp=2, dp=4, ep=4, etp=1, sequence_parallel=True), 8)
    with pytest.raises(PlanError, match="is a dense model"):
        check(small, base.with_(ep=2), 8)


def test_the_expert_order_places_ep_then_expert_dp() -> None:
    lay = layout(tp=2, pp=1, dp=16, gpus_per_node=8, ep=8, etp=1)
    assert (lay.ep.size, lay.ep.nodes) == (8, 1)  # consecutive ranks: one node
    assert (lay.edp.size, lay.edp.nodes) == (4, 4)  # 32 GPUs / (8 x 1), a node apart
    wide = layout(tp=1, pp=1, dp=32, gpus_per_node=8, ep=32)
    assert (wide.ep.size, wide.ep.nodes, wide.edp.size) == (32, 4, 1)
    et = layout(tp=4, pp=1, dp=4, gpus_per_node=8, ep=2)  # etp defaults to tp
    assert (et.etp.size, et.ep.size, et.edp.size) == (4, 2, 2)


def test_all_to_all_takes_the_slower_tier(a100: Cluster) -> None:
    n = 256e6
    inside = all_to_all_s(a100, n, Placement(8, 1))
    expect = a100.base_latency_s + 7 * (a100.nvlink_hop_s + n / 8 / a100.intra_copy_bytes_s)
    assert inside == pytest.approx(expect)
    across = all_to_all_s(a100, n, Placement(16, 2))  # half the data leaves the node
    nic = a100.base_latency_s + a100.network_hop_s + 8 * n / 16 / a100.inter_bytes_s_per_gpu
    assert across == pytest.approx(
        max(nic, a100.base_latency_s + 7 * (a100.nvlink_hop_s + n / 16 / a100.intra_copy_bytes_s))
    )
    assert across > inside
    assert all_to_all_s(a100, n, Placement(1, 1)) == 0.0


def test_routed_experts_do_the_active_flops(mixtral: Model, a100: Cluster) -> None:
    s = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, ep=8)
    dense = load_model(DENSE | {"ffn_hidden": 2 * 14336})
    # the FLOPs of top_k experts of width f equal one dense FFN of width top_k x f, plus the
    # router's GEMM
    router = 2 * 4096 * 4096 * 8
    assert layer_flops(mixtral, 1) == pytest.approx(layer_flops(dense, 1) + router)
    moe, ref = layer_cost(mixtral, s, a100), layer_cost(dense, s.with_(ep=1), a100)
    mf, rf = dict(moe.f_parts), dict(ref.f_parts)
    # one GPU's single local expert takes top_k x tokens x ep / experts = 2 x 4096 rows of
    # width 14336: the dense GEMM of 4096 rows x 28672 in FLOPs
    assert mf["gemm_fc2"] == pytest.approx(rf["gemm_fc2"], rel=0.25)
    assert mf["router"] > 0 and mf["moe_permute"] > 0 and rf["router"] == rf["moe_permute"] == 0


def test_expert_parallelism_adds_the_dispatcher_and_splits_the_experts(
    mixtral: Model, a100: Cluster
) -> None:
    s1 = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, zero=1)
    s8 = s1.with_(ep=8)
    c1, c8 = costs(mixtral, s1, a100), costs(mixtral, s8, a100)
    assert c1.f_tp == 0.0 and c8.f_tp > 0.0  # two all-to-alls each way per layer
    assert c8.b_tp == pytest.approx(c8.f_tp)
    # ep=1: every GPU holds all 8 experts; ep=8: one each, their gradients not reduced at all
    m1 = memory(mixtral, s1, 80e9, in_flight_counts(1, 1, 1))
    m8 = memory(mixtral, s8, 80e9, in_flight_counts(1, 1, 1))
    expert_w = 32 * mixtral.expert_params() * 2  # 16-bit weights of all layers' experts
    assert m1.weights - m8.weights == pytest.approx(expert_w * 7 / 8, rel=1e-6)
    assert c8.dp_layer < c1.dp_layer  # only the dense part is reduced over dp


def test_a_single_expert_times_like_the_dense_model(a100: Cluster) -> None:
    one = load_model(MIXTRAL | {"experts": 1, "top_k": 1, "name": "one"})
    dense = load_model(DENSE)
    s = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, zero=1)
    p1, pd = predict_strategy(one, a100, s), predict_strategy(dense, a100, s)
    # the same GEMMs plus a router and the permutation: a little slower, never faster
    assert pd.step_ns < p1.step_ns < 1.1 * pd.step_ns


def test_the_search_chooses_expert_parallelism(qwen: Model, a100: Cluster) -> None:
    res = search(qwen, a100, 16, 256, 5, Space(precision="bf16", zero=(1,), interleave=(1,)))
    t = res.table
    assert {"ep", "etp"} <= set(t.columns)
    assert all(128 % e == 0 for e in t["ep"])
    assert res.best[0].strategy.ep == t["ep"][0]
    assert t["step_s"].is_sorted()


def test_predict_cli_takes_ep_and_refuses_it_on_a_dense_model(tmp_path: Any) -> None:
    import json

    f = tmp_path / "qwen.json"
    f.write_text(json.dumps(QWEN3_30B))
    base = ["predict", "--model", str(f), "--system", "dgx-h100", "--nodes", "1",
            "--global-batch", "64", "--micro-batch", "1", "--zero", "1"]  # fmt: skip
    res = CliRunner().invoke(cli, [*base, "--ep", "8"])
    assert res.exit_code == 0, res.output
    assert "ep8" in res.output
    res = CliRunner().invoke(cli, [*base, "--ep", "3"])
    assert res.exit_code == 1 and "nearest valid ep" in res.output
    res = CliRunner().invoke(
        cli, ["predict", "--model", "gpt3-6.7b", "--system", "dgx-a100", "--nodes", "1",
              "--global-batch", "8", "--ep", "2"],
    )  # fmt: skip
    assert res.exit_code == 1 and "dense model" in res.output


def test_overlapped_all_to_alls_hide_behind_the_other_pass(mixtral: Model, a100: Cluster) -> None:
    from stallscope.plan import load_stack

    s = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, zero=1, ep=8)
    plain = costs(mixtral, s, a100)
    over = costs(
        mixtral, s.with_(stack=load_stack({"preset": "megatron-core", "ep_overlap": True})), a100
    )
    # Mixtral's experts take far longer than their all-to-alls: hidden, at the contention's cost
    assert over.f_tp == 0.0 and over.b_tp == 0.0 < plain.f_tp
    assert over.contention_f > plain.contention_f and over.contention_b > plain.contention_b
    assert over.f_comp + over.b_comp < plain.f_comp + plain.b_comp + plain.f_tp + plain.b_tp


def test_moe_predictions_carry_the_moe_accuracy(qwen: Model) -> None:
    from stallscope.plan._accuracy import accuracy, accuracy_note

    a = accuracy()
    assert a is not None and a["moe"]["runs"] > 0
    note = accuracy_note("GB200", moe=True)
    assert "published mixture-of-experts training runs on GB200" in note
    assert accuracy_note("GB200") != note  # a dense model gets the dense figures
    res = CliRunner().invoke(
        cli, ["predict", "--model", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--nodes", "1",
              "--gpus-per-node", "8", "--ep", "8", "--micro-batch", "4", "--global-batch", "512",
              "--zero", "1", "--precision", "fp8"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert note in res.output


def test_plan_and_whatif_show_the_expert_split() -> None:
    base = ["--model", "qwen3-30b-a3b", "--system", "dgx-h100", "--gpus", "16", "--precision",
            "fp8"]  # fmt: skip
    res = CliRunner().invoke(cli, ["plan", *base, "--top", "2"])
    assert res.exit_code == 0, res.output
    header = next(line for line in res.output.splitlines() if line.startswith("rank"))
    assert header.split()[:7] == ["rank", "tp", "pp", "dp", "ep", "etp", "mb"]
    res = CliRunner().invoke(cli, ["whatif", *base, "--knob", "nic=2"])
    assert res.exit_code == 0, res.output
    assert ".ep" in res.output and ".etp1." in res.output


def test_an_unbalanced_router_slows_the_step_by_its_busiest_gpu(qwen: Model, a100: Cluster) -> None:
    s = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, zero=1, ep=8)
    even, busy = (
        predict_strategy(qwen, a100, s),
        predict_strategy(qwen, a100, s.with_(moe_load=1.5)),
    )
    fe, fb = dict(even.costs.layer.f_parts), dict(busy.costs.layer.f_parts)  # type: ignore[union-attr]
    # 1.5 x the rows on each local expert: more time, if less than 1.5 x (longer GEMMs run
    # nearer the peak)
    assert 1.2 * fe["gemm_fc2"] < fb["gemm_fc2"] <= 1.5 * fe["gemm_fc2"]
    assert busy.step_ns > even.step_ns and busy.memory.activations > even.memory.activations
    assert "load1.5" in busy.strategy.label()
    with pytest.raises(PlanError, match=r"moe_load must be a number from 1 .* to ep = 8"):
        check(qwen, s.with_(moe_load=9.0), 8)
    with pytest.raises(PlanError, match="dense model"):
        check(load_model(DENSE), s.with_(ep=1, moe_load=1.2), 8)
    t = search(qwen, a100, 8, 64, 3, Space(zero=(1,), moe_load=2.0)).table
    assert (t["moe_load"] == t["ep"].clip(upper_bound=2).cast(pl.Float64)).all()


def test_only_attention_overlaps_its_backward_collective_in_an_moe_layer(
    mixtral: Model, a100: Cluster
) -> None:
    from stallscope.plan._comm import collective_s
    from stallscope.plan._layout import layout

    s = Strategy(tp=2, dp=4, ep=4, micro_batch=1, global_batch=4, sequence_parallel=True)
    on = costs(mixtral, s, a100)
    off = costs(
        mixtral, s.with_(stack={"preset": "megatron-core", "tp_backward_overlap": False}), a100
    )
    act = mixtral.seq_len * mixtral.hidden * 2
    group = layout(s.tp, s.pp, s.dp, a100.gpus_per_node, s.cp, s.ep, s.expert_tp).tp
    reduce = collective_s(a100, "reduce_scatter", act, group)
    # QKV's reduce-scatter leaves the critical path (its weight gradient covers it); the
    # dispatcher's half of the layer keeps its collective
    assert on.b_tp == pytest.approx(off.b_tp - reduce)
