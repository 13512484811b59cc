"""Training software stacks: the presets and their sources, dicts of fields, the errors, and
what each field changes in a configuration's costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from stallscope import plan
from stallscope.plan import Cluster, Model, PlanError, Strategy, load_stack, stack, stacks
from stallscope.plan._costs import costs


def test_presets_load_with_sources() -> None:
    table = stacks()
    assert plan.DEFAULT_STACK in table["name"].to_list()
    assert {"megatron-lm-2021", "nemo-24", "llm-foundry-2023"} <= set(table["name"])
    assert all(u.startswith("https://github.com/") for u in table["source_url"])
    assert stack("MEGATRON-LM-2021").dp_overlap is False  # any case
    assert stack("nemo-24").attention == "cudnn"


def test_a_dict_starts_from_its_preset() -> None:
    st = load_stack({"preset": "nemo-24", "tp_overlap": True})
    assert st.tp_overlap and st.attention == "cudnn" and st.name == "nemo-24+"
    assert load_stack({"attention": "flash3"}).dp_overlap == stack(plan.DEFAULT_STACK).dp_overlap


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("nemo", "no software stack 'nemo'.*nemo-24"),
        ({"attention": "flash4"}, "attention 'flash4' is not one of"),
        ({"fsdp_reduce_bytes": 3}, "fsdp_reduce_bytes must be 2"),
        ({"tp_overlap": "yes"}, "tp_overlap must be true or false"),
        ({"tp_overlapp": True}, "unknown stack keys 'tp_overlapp'.*tp_overlap"),
        ({"fsdp_backward_prefetch": "later"}, "fsdp_backward_prefetch 'later' is not one of"),
        ({"elementwise": "jit"}, "elementwise 'jit' is not one of"),
        ({"gqa_repeat": "yes"}, "gqa_repeat must be true or false"),
        ({"loss_saved_bytes": 8}, "kept for the backward.*at most the peaks, got 6, 6, 8"),
        ({"loss_bytes": -2}, "loss_bytes, loss_parallel_bytes and loss_saved_bytes must be"),
        ({"loss_parallel_bytes": True}, "must be numbers of bytes per logit"),
    ],
)
def test_bad_stacks_name_the_fix(source: str | dict[str, object], match: str) -> None:
    with pytest.raises(PlanError, match=match):
        load_stack(source)


def test_a_strategy_checks_its_stack(gpt3: Model) -> None:
    with pytest.raises(PlanError, match="no software stack"):
        plan._strategy.check(gpt3, Strategy(stack="nope"))


def test_fsdp_reduction_width_and_param_gather_overlap(gpt3: Model, a100: Cluster) -> None:
    z3 = Strategy(tp=8, dp=8, global_batch=8, zero=3)
    bf16 = costs(gpt3, z3.with_(stack={"fsdp_reduce_bytes": 2}), a100)
    fp32 = costs(gpt3, z3.with_(stack={"fsdp_reduce_bytes": 4}), a100)
    assert fp32.zero_rs == pytest.approx(2 * bf16.zero_rs, rel=0.05)
    assert fp32.zero_ag == bf16.zero_ag
    z1 = Strategy(tp=8, pp=4, dp=2, global_batch=8, zero=1)
    hidden = costs(gpt3, z1, a100)  # the default stack gathers behind the next forward
    exposed = costs(gpt3, z1.with_(stack={"param_gather_overlap": False}), a100)
    # one layer of the stage's 24 is waited for
    assert hidden.param_ag_layer == pytest.approx(exposed.param_ag_layer * 4 / 96)


def test_old_megatron_reduces_gradients_after_the_backward(gpt3: Model) -> None:
    kw = {"nodes": 4, "tp": 8, "pp": 1, "global_batch": 64, "micro_batch": 2}
    new = plan.predict_model(gpt3.to_dict() | {"layers": 8}, "dgx-a100", **kw)
    old = plan.predict_model(
        gpt3.to_dict() | {"layers": 8}, "dgx-a100", stack="megatron-lm-2021", **kw
    )
    c = costs(new.model, new.strategy, new.system)
    # the whole gradient all-reduce (8 layers + the tied embedding once) shows in the old step;
    # the new one hides all but the last layer's behind the backward
    total = (8 * c.dp_layer + c.dp_embed) * 1e9
    assert old.columns()["network_ns"] == pytest.approx(total, rel=1e-6)
    assert new.columns()["network_ns"] < 0.7 * total
    assert old.step_ns > new.step_ns


def test_attention_kernels_by_published_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stallscope.plan import _cluster, load_system

    measured = load_system("dgx-h100").device
    monkeypatch.setattr(_cluster, "_TABLES", tmp_path)  # the published rates alone
    h100, a100 = load_system("dgx-h100").device, load_system("dgx-a100").device
    # FlashAttention-3's Figure 5: causal forward, head dim 128, 8k tokens: cuDNN 529 TFLOP/s
    flops = 4 * 8192**2 * 128 * 16 * 0.5
    f, _ = h100.attention_s(1, 16, 8192, 128, True, "bf16", "cudnn")
    assert flops / (f - h100.gemm_fixed_s) == pytest.approx(529e12, rel=1e-9)
    fa2, fa3 = (h100.attention_s(1, 16, 8192, 128, True, "bf16", k) for k in ("flash2", "flash3"))
    assert fa3[0] < f < fa2[0] and fa3[1] < fa2[1]
    assert h100.attention_s(1, 16, 8192, 128, True, "bf16", "auto") == (f, _)
    # sdpa runs FlashAttention-2's kernels; the 2022 Triton kernel is 1.8x slower
    assert h100.attention_s(1, 16, 8192, 128, True, "bf16", "sdpa") == fa2
    tri = h100.attention_s(1, 16, 8192, 128, True, "bf16", "flash-triton")
    assert tri[0] - h100.gemm_fixed_s == pytest.approx(1.8 * (fa2[0] - h100.gemm_fixed_s))
    # head dim 96 lies between the tables' 64 and 128; no table for A100: FA2's fractions
    mid = h100.attention_s(1, 16, 4096, 96, False, "bf16", "cudnn")[0]
    # non-causal forward at 4k tokens: 408 (head dim 64) and 609 (128) TFLOP/s, 508.5 midway
    assert 4 * 4096**2 * 96 * 16 / (mid - h100.gemm_fixed_s) == pytest.approx(508.5e12)
    f_a, b_a = a100.attention_s(1, 16, 2048, 128, True, "bf16", "cudnn")
    fl = 4 * 2048**2 * 128 * 16 * 0.5
    assert fl / (f_a - a100.gemm_fixed_s) == pytest.approx(0.70 * 312e12)
    assert 2.5 * fl / (b_a - 2 * a100.gemm_fixed_s) == pytest.approx(0.55 * 312e12)
    if measured.attention_measured == "cudnn":  # the shipped H200 table's SDPA rows: cuDNN
        m, _ = measured.attention_s(1, 16, 8192, 128, True, "bf16", "cudnn")
        assert flops / (m - measured.gemm_fixed_s) == pytest.approx(529e12, rel=0.1)


def test_a_stack_that_runs_attention_unfused_pays_for_the_scores(
    gpt3: Model, a100: Cluster
) -> None:
    s = Strategy(tp=8, pp=1, dp=1, micro_batch=1, global_batch=1)
    fused = dict(costs(gpt3, s, a100).layer.f_parts)["attention"]  # type: ignore[union-attr]
    unfused = costs(gpt3, s.with_(stack="megatron-lm-2021"), a100).layer
    assert unfused is not None and dict(unfused.f_parts)["attention"] > 2 * fused


def test_tp_overlap_hides_tp_traffic_and_slows_the_gemms(gpt3: Model) -> None:
    from stallscope.plan import load_system
    from stallscope.plan._overlap import TP_SPLITS, contention

    h100 = load_system("dgx-h100")
    s = Strategy(tp=8, pp=8, dp=1, micro_batch=1, global_batch=8, sequence_parallel=True)
    plain = costs(gpt3, s.with_(stack="nemo-24"), h100)
    ub = costs(gpt3, s.with_(stack={"preset": "nemo-24", "tp_overlap": True}), h100)
    assert plain.layer is not None
    gemm_f = sum(dict(plain.layer.f_parts)[k] for k in ("gemm_qkv", "gemm_proj", "gemm_fc1"))
    gemm_f += dict(plain.layer.f_parts)["gemm_fc2"]
    assert plain.f_tp < gemm_f  # GPT-3 at tp 8 on NVLink: the GEMMs can cover the traffic
    assert ub.f_tp == pytest.approx(plain.f_tp / (2 * TP_SPLITS))
    assert ub.contention_f == pytest.approx(contention() * plain.f_tp)
    assert ub.f_comp == pytest.approx(plain.f_comp + ub.contention_f)
    assert plain.contention_f == 0.0


def test_contention_from_overlapped_collectives(gpt3: Model, a100: Cluster) -> None:
    from stallscope.plan._overlap import contention

    z3 = Strategy(tp=8, dp=8, global_batch=8, zero=3)
    c = costs(gpt3, z3, a100)
    assert c.contention_f == pytest.approx(contention() * min(c.zero_ag, c.f_comp - c.contention_f))
    z1 = Strategy(tp=8, pp=4, dp=2, global_batch=8, zero=1)
    on = costs(gpt3, z1, a100)
    off = costs(gpt3, z1.with_(stack={"dp_overlap": False, "param_gather_overlap": False}), a100)
    assert off.contention_step_layer == 0.0 < on.contention_step_layer
    assert on.opt_layer - on.contention_step_layer == pytest.approx(off.opt_layer)


def test_nvlink_efficiency_by_gpu_family() -> None:
    from stallscope.plan import load_system

    # H100: dgxc-benchmarking's nccl-tests all-reduce on a DGX H100 (NVLink SHARP); A100: p4d
    assert load_system("dgx-h100").intra_node_fraction == pytest.approx(0.98)
    assert load_system("dgx-h200").intra_node_fraction == pytest.approx(0.98)
    assert load_system("dgx-a100").intra_node_fraction == pytest.approx(0.77)


def test_blackwell_nvlink_efficiency_from_xla_collective_table() -> None:
    """B200 and GB200 take the bus bandwidth XLA's collective table measured on each: the
    NVL72 switches reduce in the network (all-reduce above its copies), a DGX B200's do not."""
    from stallscope.plan import load_system
    from stallscope.plan._gemm import efficiency_defaults

    by_gpu = efficiency_defaults()["intra_node_fraction"]["by_gpu"]
    b200, gb200 = load_system("dgx-b200"), load_system("gb200-nvl72")
    assert (b200.intra_node_fraction, b200.intra_node_copy_fraction) == (0.68, 0.7)
    assert (gb200.intra_node_fraction, gb200.intra_node_copy_fraction) == (0.93, 0.77)
    assert gb200.intra_node_fraction > gb200.intra_node_copy_fraction
    for gpu in ("B200", "GB200"):  # each figure with its measurement and date
        entry = by_gpu[gpu]
        assert "collective_interpolator_data.h" in entry["source"] and entry["date"]
        assert entry["copy"]["basis"]


def test_fsdp_backward_post_pays_the_backward_gathers(gpt3: Model, a100: Cluster) -> None:
    """llm-foundry's Composer leaves PyTorch FSDP at BACKWARD_POST: the fully sharded backward
    waits for each layer's gather; a stack at BACKWARD_PRE hides it beside the compute."""
    from stallscope.plan import predict_strategy

    assert load_stack("llm-foundry-2023").fsdp_backward_prefetch == "post"
    z3 = Strategy(tp=1, dp=64, micro_batch=1, global_batch=64, zero=3)
    pre = predict_strategy(gpt3, a100, z3.with_(stack={"fsdp_backward_prefetch": "pre"}))
    post = predict_strategy(gpt3, a100, z3.with_(stack={"fsdp_backward_prefetch": "post"}))
    assert post.step_ns > pre.step_ns
    exposed = post.columns()["network_ns"] - pre.columns()["network_ns"]
    assert exposed > 0.5 * (post.step_ns - pre.step_ns)  # the wait shows as communication


def test_column_parallel_backward_collectives_run_beside_their_gemms(gpt3: Model) -> None:
    from stallscope.plan import load_system
    from stallscope.plan._comm import collective_s
    from stallscope.plan._layout import layout
    from stallscope.plan._overlap import slowed

    h100 = load_system("dgx-h100")
    s = Strategy(tp=8, pp=8, dp=1, micro_batch=1, global_batch=8, stack="megatron-core")
    blocking = {"preset": "megatron-core", "tp_backward_overlap": False}
    for sp in (False, True):
        on = costs(gpt3, s.with_(sequence_parallel=sp), h100)
        off = costs(gpt3, s.with_(sequence_parallel=sp, stack=blocking), h100)
        assert on.layer is not None
        assert on.f_tp == off.f_tp and on.contention_f == off.contention_f  # forward as before
        act = gpt3.seq_len * gpt3.hidden * 2
        group = layout(8, 8, 1, 8).tp
        reduce = collective_s(h100, "reduce_scatter" if sp else "all_reduce", act, group)
        gather = collective_s(h100, "all_gather", act, group) if sp else 0.0
        halves = [dict(on.layer.b_parts)[k] / 2 for k in ("gemm_qkv", "gemm_fc1")]
        # GPT-3's GEMMs at tp 8 cover the collectives: the two reductions (and under sequence
        # parallelism the re-gathers) leave the critical path and slow the GEMMs instead
        assert all(half > max(reduce, gather) for half in halves)
        assert on.b_tp == pytest.approx(off.b_tp - 2 * reduce)
        lost = sum(slowed(reduce, half) + slowed(gather, half) for half in halves)
        assert on.contention_b == pytest.approx(lost)
        assert on.b_comp == pytest.approx(off.b_comp + lost)
    # what a collective takes beyond its GEMM stays exposed: a narrow model on slow links
    slow = load_system({"gpu": "A100-80GB", "gpus_per_node": 8, "intra_node_GBps": 20,
                        "inter_node_Gbps": 100})  # fmt: skip
    narrow = plan.load_model({"layers": 2, "hidden": 1024, "heads": 8, "seq_len": 512,
                              "vocab": 1000})  # fmt: skip
    n = Strategy(tp=8, micro_batch=1, global_batch=1)
    on = costs(narrow, n, slow)
    off = costs(narrow, n.with_(stack=blocking), slow)
    assert 0 < on.b_tp < off.b_tp


def test_stacks_state_their_tensor_parallel_backward() -> None:
    # Megatron-Core and NeMo (Transformer Engine's linears) overlap; the 2021 Megatron-LM of
    # the SC'21 runs, Megatron-DeepSpeed and torchtitan's DTensor linears do not
    assert stack("megatron-core").tp_backward_overlap and stack("nemo-25").tp_backward_overlap
    for name in ("megatron-lm-2021", "megatron-deepspeed-2021", "torchtitan-2024"):
        assert not stack(name).tp_backward_overlap
    with pytest.raises(PlanError, match="tp_backward_overlap must be true or false"):
        load_stack({"tp_backward_overlap": 1})
