"""Training software stacks: the presets and their sources, dicts of fields, the errors, and
what each field changes in a configuration's costs."""

from __future__ import annotations

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
