"""torchtitan's per-op selective recompute (module ``ops``), the stack's default modules and
FP8 weight gathers under ZeRO 3: what is recomputed, what is kept, the checks and the search."""

from __future__ import annotations

from typing import Any

import pytest

from stallscope.plan import (
    Cluster,
    Model,
    PlanError,
    Strategy,
    load_model,
    load_system,
    predict_strategy,
)
from stallscope.plan._fp8 import fp8_weight_casts
from stallscope.plan._layer import layer_cost
from stallscope.plan._memory import layer_activation_bytes
from stallscope.plan._recompute import ops_gemm_shares
from stallscope.plan._search import Space, search
from stallscope.plan._stack import load_stack
from stallscope.plan._strategy import check

from .conftest import SMALL_GATED

LLAMA: dict[str, Any] = SMALL_GATED | {"name": "llama-ops", "kv_heads": 4}
TITAN = Strategy(dp=8, micro_batch=1, global_batch=8, stack="torchtitan-2024", zero=3)


@pytest.fixture
def llama() -> Model:
    return load_model(LLAMA)


def _ops(**kw: Any) -> Strategy:
    return TITAN.with_(recompute="selective", recompute_modules=("ops",), **kw)


def test_the_stack_decides_what_selective_recompute_rebuilds() -> None:
    assert TITAN.with_(recompute="selective").recomputed == {"ops"}
    assert Strategy(recompute="selective").recomputed == {"core_attn"}
    custom = load_stack({"preset": "megatron-core", "selective_recompute": "layernorm+mlp"})
    assert Strategy(recompute="selective", stack=custom).recomputed == {"layernorm", "mlp"}
    # modules the configuration names win over the stack's
    assert TITAN.with_(recompute="selective", recompute_modules=("mlp",)).recomputed == {"mlp"}


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"selective_recompute": "attention"}, "names 'attention'"),
        ({"selective_recompute": "ops+mlp"}, "'ops' stands alone"),
        ({"fsdp_param_bytes": 3}, "1 \\(FP8 weights gathered\\), 2"),
        ({"fsdp_reduce_bytes": 1}, "fsdp_reduce_bytes must be 2"),
    ],
)
def test_bad_stack_fields_are_named(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(PlanError, match=words):
        load_stack({"preset": "torchtitan-2024"} | fields)


def test_ops_is_a_whole_policy(llama: Model) -> None:
    with pytest.raises(PlanError, match=r"'ops' is a whole policy.*drop it for mlp"):
        check(llama, TITAN.with_(recompute="selective", recompute_modules=("ops", "mlp")), 8)
    check(llama, _ops(), 8)


def test_every_second_matmul_and_the_elementwise_work_are_recomputed(
    llama: Model, a100: Cluster
) -> None:
    kv, up, down = ops_gemm_shares(llama)
    assert kv == pytest.approx(512 / (2048 + 2 * 512))  # wk of wq, wk, wv
    assert (up, down) == (0.5, 0.0)  # gated: w3 of w1, w3; w2 kept
    assert ops_gemm_shares(load_model(LLAMA | {"gated_ffn": False}))[1:] == (0.0, 1.0)
    f = dict(layer_cost(llama, TITAN, a100).f_parts)
    got = dict(layer_cost(llama, _ops(), a100).b_parts)["recompute"]
    want = kv * f["gemm_qkv"] + f["gemm_proj"] + up * f["gemm_fc1"] + f["elementwise"]
    assert got == pytest.approx(want + f["fp8_cast"])
    full = dict(layer_cost(llama, TITAN.with_(recompute="full"), a100).b_parts)["recompute"]
    assert 0 < got < full


def test_ops_keeps_the_kept_matmuls_outputs(llama: Model) -> None:
    sb, h = 4096, 2048
    q, kv = 2048, 512
    # the block's input, Q, V, the attention's output and log-sum-exp, w1's and w2's outputs
    want = 2 * sb * h + 2 * sb * (q + kv + q) + 4 * 16 * sb + 2 * sb * 8192 + 2 * sb * h
    eager = load_stack({"preset": "torchtitan-2024", "elementwise": "eager"})
    assert layer_activation_bytes(llama, _ops(stack=eager)) == want
    # compiled, the policy keeps what the backward reads: not w2's output (the residual's)
    assert layer_activation_bytes(llama, _ops()) == want - 2 * sb * h
    none = layer_activation_bytes(llama, TITAN)
    full = layer_activation_bytes(llama, TITAN.with_(recompute="full"))
    assert full < want < none
    # under tensor parallelism with sequence parallelism, eager: the reduce-scatters' outputs too
    tp = _ops(tp=2, dp=4, sequence_parallel=True)
    rs = 2 * 2 * sb * h / 2
    assert layer_activation_bytes(llama, tp.with_(stack=eager)) == pytest.approx(
        layer_activation_bytes(llama, tp) + rs + 2 * sb * h
    )


def test_moe_layers_recompute_their_routed_experts(a100: Cluster) -> None:
    moe = load_model(LLAMA | {"experts": 8, "top_k": 2, "moe_ffn_hidden": 1024})
    s = _ops(ep=8)
    f = dict(layer_cost(moe, TITAN.with_(ep=8), a100).f_parts)
    got = dict(layer_cost(moe, s, a100).b_parts)["recompute"]
    assert got > f["gemm_fc1"] + f["gemm_fc2"]  # the routed experts, whole
    kept = layer_activation_bytes(moe, s)
    assert kept < layer_activation_bytes(moe, TITAN.with_(ep=8))


def test_selective_is_searched_where_the_stack_recomputes_something(
    llama: Model, a100: Cluster
) -> None:
    space = Space(zero=(3,), interleave=(1,), stack="torchtitan-2024")
    titan = search(llama, a100, 8, 64, 100, space)
    assert "selective" in set(titan.table["recompute"])
    mcore = search(llama, a100, 8, 64, 100, Space(zero=(3,), interleave=(1,)))
    assert "selective" not in set(mcore.table["recompute"])  # flash: nothing to recompute


def test_fp8_weight_gathers(llama: Model) -> None:
    h100 = load_system("dgx-h100")
    fp8 = {"preset": "torchtitan-2024", "fsdp_param_bytes": 1}
    s = TITAN.with_(precision="fp8", stack=fp8)
    assert s.fsdp_gather_bytes == 1
    assert TITAN.with_(stack=fp8).fsdp_gather_bytes == 2  # a bf16 run gathers 16 bit
    # each GPU casts its own shard before the gather: 1/8 of the layer's weights
    plain = TITAN.with_(precision="fp8")
    shard, whole = fp8_weight_casts(llama, s, h100, 1), fp8_weight_casts(llama, plain, h100, 1)
    launch = h100.device.memory_s(0, 4)  # the cast kernels' fixed time
    assert shard - launch == pytest.approx((whole - launch) / 8)
    assert predict_strategy(llama, h100, s).step_ns < predict_strategy(llama, h100, plain).step_ns
