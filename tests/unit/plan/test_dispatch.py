"""The token dispatchers of a mixture of experts: the copies each link tier carries under the
all-to-all dispatcher and under the flex dispatcher's deduplication (``_dispatch``)."""

from __future__ import annotations

from itertools import combinations
from math import comb

import pytest

from stallscope.plan import Cluster, PlanError, Strategy, load_model, load_stack, load_system
from stallscope.plan._dispatch import expert_dispatch_s, flex_copies, holds_any
from stallscope.plan._layout import Placement, layout
from stallscope.plan._predict import predict_strategy

QWEN = "qwen3-30b-a3b"  # 128 experts, 8 per token, hidden 2048


def test_holds_any_is_one_minus_the_chance_of_missing_every_held_expert() -> None:
    assert holds_any(128, 16, 8) == pytest.approx(1 - comb(112, 8) / comb(128, 8))
    assert holds_any(128, 16, 8) == pytest.approx(0.667, abs=1e-3)
    assert holds_any(128, 0, 8) == 0.0
    assert holds_any(128, 128, 8) == 1.0  # every expert held
    assert holds_any(10, 4, 8) == 1.0  # 8 picks among 10 cannot miss 4


def test_flex_copies_count_the_distinct_gpus_and_nodes_a_token_reaches() -> None:
    """Enumerate every top-2 choice of 8 experts on 4 GPUs of 2 experts, 2 GPUs per node:
    rank 0 sends a token to the other GPU of its node if it holds one of the token's experts,
    once over the network to the other node's rank 2 if that node holds one, and rank 2
    forwards it to rank 3 if rank 3 holds one. By symmetry rank 0 forwards as many of the
    tokens rank 2 sends it: the NVLink copies per token of rank 0 are these two counts."""
    m = load_model(QWEN).to_dict() | {"experts": 8, "top_k": 2, "name": "tiny"}
    model = load_model(m)
    nvlink = network = 0.0
    picks = list(combinations(range(8), 2))
    for pick in picks:
        ranks = {e // 2 for e in pick}  # 2 experts per GPU, GPUs 0-1 on node 0, 2-3 on node 1
        nvlink += 1 in ranks  # rank 0's own node
        if ranks & {2, 3}:
            network += 1
            nvlink += 3 in ranks  # rank 2 forwards to rank 3
    want = (nvlink / len(picks), network / len(picks))
    assert flex_copies(model, Placement(4, 2)) == pytest.approx(want)
    one_node = flex_copies(model, Placement(4, 1))  # each other GPU holding one, no network
    assert one_node == pytest.approx((3 * holds_any(8, 2, 2), 0.0))


def test_the_flex_dispatcher_sends_a_token_once_per_gpu_and_once_per_node() -> None:
    qwen = load_model(QWEN)
    h100 = load_system("dgx-h100")
    s = Strategy(tp=1, pp=1, dp=16, micro_batch=1, global_batch=1024, zero=1, ep=16)
    flex = s.with_(stack=load_stack({"preset": "nemo-25", "moe_dispatcher": "flex"}))
    a2a = s.with_(stack=load_stack({"preset": "nemo-25", "moe_dispatcher": "alltoall"}))
    lay = layout(tp=1, pp=1, dp=16, gpus_per_node=8, ep=16)
    assert (lay.ep.size, lay.ep.nodes) == (16, 2)
    tokens = 4096
    t_flex = expert_dispatch_s(qwen, flex, h100, lay, tokens)
    t_a2a = expert_dispatch_s(qwen, a2a, h100, lay, tokens)
    # across two nodes the network sets both times: top_k x 8/16 = 4 copies per token against
    # about 1 (a node of 64 experts misses all 8 picks with chance C(64, 8) / C(128, 8))
    per_token = qwen.hidden * 2 / h100.inter_bytes_s_per_gpu
    assert t_a2a == pytest.approx(h100.base_latency_s + h100.network_hop_s + 4 * tokens * per_token)
    node = holds_any(128, 64, 8)
    assert t_flex == pytest.approx(
        h100.base_latency_s + h100.network_hop_s + node * tokens * per_token
    )
    # on one node: 7 x P(a GPU holds one of 8 picks among its 16 experts) copies against 7
    one = layout(tp=1, pp=1, dp=8, gpus_per_node=8, ep=8)
    fixed = h100.base_latency_s + 7 * h100.nvlink_hop_s  # the hops: the same either way
    ratio = (expert_dispatch_s(qwen, flex, h100, one, tokens) - fixed) / (
        expert_dispatch_s(qwen, a2a, h100, one, tokens) - fixed
    )
    assert ratio == pytest.approx(holds_any(128, 16, 8))
    # the whole step: the flex dispatcher's is shorter, a dense model's is the same
    assert predict_strategy(qwen, h100, flex).step_ns < predict_strategy(qwen, h100, a2a).step_ns


def test_a_dense_model_ignores_the_dispatcher(a100: Cluster) -> None:
    dense = load_model("llama3-8b")
    s = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, zero=1)
    flex = s.with_(stack=load_stack({"preset": "megatron-core", "moe_dispatcher": "flex"}))
    assert predict_strategy(dense, a100, flex).step_ns == predict_strategy(dense, a100, s).step_ns


def test_an_unknown_dispatcher_names_the_choices() -> None:
    with pytest.raises(PlanError, match=r"moe_dispatcher 'deepep' is not one of .*alltoall.*flex"):
        load_stack({"preset": "nemo-25", "moe_dispatcher": "deepep"})


def test_the_cli_takes_the_dispatcher_in_place_of_the_stacks() -> None:
    import json

    from click.testing import CliRunner

    from stallscope.cli.main import cli

    base = ["predict", "--model", QWEN, "--system", "dgx-h100", "--nodes", "2", "--dp", "16",
            "--ep", "16", "--micro-batch", "1", "--global-batch", "1024", "--zero", "1",
            "--json", "-"]  # fmt: skip
    steps = {}
    for disp in ("alltoall", "flex"):
        res = CliRunner().invoke(cli, [*base, "--moe-dispatcher", disp])
        assert res.exit_code == 0, res.output
        p = json.loads(res.output)["predictions"][0]
        steps[disp] = p["step_ns"]
        assert p["stack"] == ("megatron-core" if disp == "alltoall" else "megatron-core+flex")
    assert steps["flex"] < steps["alltoall"]  # a quarter of the off-node copies
    res = CliRunner().invoke(cli, [*base, "--moe-dispatcher", "deepep"])
    assert res.exit_code == 2 and "'alltoall', 'flex'" in res.output
    plan = ["plan", "--model", QWEN, "--system", "dgx-h100", "--gpus", "16", "--top", "2",
            "--moe-dispatcher", "flex", "--json", "-"]  # fmt: skip
    res = CliRunner().invoke(cli, plan)
    assert res.exit_code == 0, res.output
