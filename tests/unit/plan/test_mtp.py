"""Multi-token prediction modules (DeepSeek-V3, GLM-4.5): their keys, parameters and FLOPs,
their place in a pipeline layout, their cost with the loss on the last stage, and memory."""

from __future__ import annotations

from typing import Any

import pytest

from stallscope.plan import Cluster, Model, PlanError, Strategy, load_model, predict_strategy
from stallscope.plan._costs import costs, layer_flops, model_flops
from stallscope.plan._layer import gemm_fwd_bwd
from stallscope.plan._memory import memory
from stallscope.plan._schedule import in_flight_counts
from tests.unit.plan.conftest import SMALL_MOE

#: A small MoE with dense first layers, and the same with one MTP module
MOE: dict[str, Any] = SMALL_MOE | {"name": "mtp-test", "dense_layers": 1}


@pytest.fixture
def base() -> Model:
    return load_model(MOE)


@pytest.fixture
def mtp() -> Model:
    return load_model(MOE | {"name": "mtp", "mtp_layers": 1})


def test_megatron_names_the_modules_too() -> None:
    assert load_model(MOE | {"mtp_num_layers": 2}).mtp_layers == 2
    with pytest.raises(PlanError, match="mtp_layers must be a non-negative integer"):
        load_model(MOE | {"mtp_layers": -1})


def test_params_and_flops_count_each_module(base: Model, mtp: Model) -> None:
    h = base.hidden
    assert mtp.params() - base.params() == base.layer_params() + 2 * h * h + 3 * h
    tokens = base.seq_len
    module = layer_flops(base, 1) + 2 * tokens * 2 * h * h + 2 * tokens * h * base.vocab
    assert model_flops(mtp, 1) - model_flops(base, 1) == pytest.approx(3 * module)


def test_a_module_runs_with_the_loss(base: Model, mtp: Model, a100: Cluster) -> None:
    s = Strategy(tp=1, pp=2, dp=4, micro_batch=1, global_batch=16, ep=4, zero=1)
    c0, c1 = costs(base, s, a100), costs(mtp, s, a100)
    tokens, h = base.seq_len, base.hidden
    pf, _ = gemm_fwd_bwd(a100, tokens, 2 * h, h, "bf16")
    norms = a100.device.memory_s(3 * 2 * tokens * h * 2, 3)
    # a layer (compute and communication), the projection, norms, an embedding lookup, and
    # its own output layer and loss beside the model's
    want = 2 * c0.logits_f + c0.f_comp + c0.f_tp + pf + norms + c0.embed_f
    assert c1.logits_f == pytest.approx(want)
    assert c1.f_comp == c0.f_comp and c1.embed_f == c0.embed_f
    p0, p1 = predict_strategy(base, a100, s), predict_strategy(mtp, a100, s)
    assert p1.step_ns > p0.step_ns
    assert p1.stages[-1]["compute_ns"] > p0.stages[-1]["compute_ns"]


def test_the_last_stage_holds_the_module_and_an_embedding(
    base: Model, mtp: Model, a100: Cluster
) -> None:
    s = Strategy(tp=1, pp=2, dp=4, micro_batch=1, global_batch=16, ep=4, zero=0)
    infl = in_flight_counts(2, s.micro_batches, 1)
    m0 = memory(base, s, 1e15, infl, every_stage=True)
    m1 = memory(mtp, s, 1e15, infl, every_stage=True)
    assert m1.stage == 1  # the module and the embedding copy tip the balance
    assert m0.weights < m1.weights
    own = mtp.mtp_params() - mtp.expert_params() + mtp.embedding_params()
    experts = mtp.expert_params() / 4
    # weights in 16 bit (ZeRO 0): the last stage's grow by the module's and the embedding's
    from stallscope.plan._memory import stage_expert_params, stage_params

    w_last = (stage_params(base, s, 1, 4) + stage_expert_params(base, s, 4)) * s.weight_bytes
    assert m1.weights == pytest.approx(w_last + (own + experts) * s.weight_bytes)
    # the loss's peak (Megatron: 6 bytes a logit) and what the module's loss keeps (4)
    assert m1.logits == pytest.approx((6 + 4) * base.seq_len * base.vocab)


def test_a_layout_writes_the_modules_right_before_the_loss(mtp: Model, a100: Cluster) -> None:
    s = Strategy(tp=1, pp=2, dp=4, micro_batch=1, global_batch=16, ep=4, zero=1)
    predict_strategy(mtp, a100, s.with_(pipeline_layout="Et*4|t*4mL"))
    with pytest.raises(PlanError, match="holds 0 multi-token prediction layers"):
        predict_strategy(mtp, a100, s.with_(pipeline_layout="Et*4|t*4L"))
    with pytest.raises(PlanError, match="stand apart from the loss"):
        predict_strategy(mtp, a100, s.with_(pipeline_layout="Et*4m|t*4L"))
    base = load_model(MOE)
    with pytest.raises(PlanError, match=r"holds 1 multi-token .* has 0.*drop them"):
        predict_strategy(base, a100, s.with_(pipeline_layout="Et*4|t*4mL"))
