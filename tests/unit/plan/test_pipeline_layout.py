"""A pipeline layout in Megatron-Core's notation (pipeline_model_parallel_layout): parsing and
writing it, the rules and their errors, each (stage, chunk)'s layers in the step and memory,
the API and the label."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stallscope.plan import Cluster, Model, PlanError, Strategy, load_model, predict_model
from stallscope.plan._pipeline_layout import parse, write_layout
from stallscope.plan._pipeline_split import chunk_layers, stage_layers
from stallscope.plan._predict import predict_strategy
from stallscope.plan._strategy import check

from .conftest import DEEP, DGX_A100, GPT3

#: Llama 3 405B's split of 126 layers on 16 stages, a layer fewer at each end; interleave 2:
#: chunks of 3 + 4 on the end stages
LLAMA3 = "Et*3|(t*4|)*30,t*3L"


def _s(**kw: object) -> Strategy:
    base: dict[str, object] = {
        "tp": 8, "pp": 16, "dp": 1, "global_batch": 32, "recompute": "full", "interleave": 2,
        "pipeline_layout": LLAMA3,
    }  # fmt: skip
    return Strategy(**(base | kw))  # type: ignore[arg-type]


def test_megatron_core_notation_unrolls_in_model_order() -> None:
    # the docstring example of Megatron-Core's parser, MTP left out
    assert parse("Ettt|(tt|)*29,tt|L") == ["Ettt", *["tt"] * 29, "tt", "L"]
    assert parse(" E t*2 | t , t*2 L ") == ["Ett", "tttL"]
    assert parse("E||tL") == ["E", "", "tL"]  # a chunk may hold nothing


@given(st.lists(st.text(alphabet="EtL", max_size=5), min_size=2, max_size=12))
def test_written_layouts_parse_back(chunks: list[str]) -> None:
    assert parse(write_layout(chunks)) == chunks


def test_each_chunk_runs_on_stage_i_mod_pp(deep: Model) -> None:
    s = _s()
    check(deep, s)
    chunks = chunk_layers(deep, s)
    assert chunks[0] == (3, 4) and chunks[-1] == (4, 3)
    assert all(c == (4, 4) for c in chunks[1:-1])
    assert stage_layers(deep, s) == (7, *(8,) * 14, 7) and sum(stage_layers(deep, s)) == 126
    assert write_layout(["Ettt", *["tttt"] * 30, "tttL"]) == "Et*3|(t*4|)*30t*3L"
    assert s.label().endswith(f".v2.layout[{LLAMA3}]")


def test_a_layout_of_megatron_core_s_own_rules_predicts_as_they_do(
    deep: Model, a100: Cluster
) -> None:
    # the embedding and the loss as layers: 128 slots, 16 stages x 8 chunks of 1, the first
    # and the last chunk empty but for the embedding / the loss
    rule = _s(interleave=8, pipeline_layout=None, embedding_as_layer=True, loss_as_layer=True)
    layout = _s(interleave=8, pipeline_layout="E|(t|)*126L")
    assert chunk_layers(deep, rule) == chunk_layers(deep, layout)
    a, b = predict_strategy(deep, a100, rule), predict_strategy(deep, a100, layout)
    assert a.step_ns == b.step_ns and a.memory.total == b.memory.total
    # the even split of GPT-3's 96 layers
    gpt3 = load_model(GPT3)
    even = _s(pp=8, interleave=1, pipeline_layout=None)
    written = _s(pp=8, interleave=1, pipeline_layout="Et*12|(t*12|)*6t*12L")
    assert (
        predict_strategy(gpt3, a100, even).step_ns == predict_strategy(gpt3, a100, written).step_ns
    )


def test_a_heavier_stage_is_the_slowest_and_holds_the_most(a100: Cluster) -> None:
    gpt3 = load_model(GPT3)  # 96 layers on 8 stages: 12 each, or 19 on stage 3
    even = predict_strategy(gpt3, a100, _s(pp=8, interleave=1, pipeline_layout=None))
    heavy = predict_strategy(
        gpt3, a100, _s(pp=8, interleave=1, pipeline_layout="Et*11|(t*11|)*2,t*19|(t*11|)*3t*11L")
    )
    comp = [stage["compute_ns"] for stage in heavy.stages]
    assert comp.index(max(comp)) == 3
    assert heavy.step_ns > even.step_ns
    assert heavy.memory.stage == 3 and heavy.memory.total > even.memory.total


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"pipeline_layout": "Et*3|(t*4|)*30,t*3"}, r"'L' \(the loss\) is missing"),
        ({"pipeline_layout": "t*3E|(t*4|)*30,t*3L"}, "'E' .* stands elsewhere"),
        ({"pipeline_layout": "Et*3|(t*4|)*30,Et*2L"}, "'E' .* stands 2 times"),
        ({"pipeline_layout": "Et*3|(t*4|)*30,t*4L"}, "holds 127 transformer layers.*remove 1"),
        ({"pipeline_layout": "Et*3|(t*4|)*29,t*3L"}, "31 chunks do not split over pp=16"),
        (
            {"interleave": 4},
            r"32 chunks on pp=16 stages are 2 chunks per stage, but "
            r"interleave=4; set interleave 2",
        ),
        ({"pipeline_layout": "Et*3|(t*4|)*30,t*3mL"}, "multi-token prediction"),
        ({"pipeline_layout": "Et*3|(t*4|)*30,t*3Lx"}, "'x' is not a letter of the notation"),
        ({"pipeline_layout": "Et*9999999L"}, "unrolls to 10,000,001 letters"),
        ({"pipeline_layout": " "}, "non-empty string"),
        ({"embedding_as_layer": True}, "excludes first / last stage layer counts"),
        ({"first_stage_layers": 7}, "excludes first / last stage layer counts"),
    ],
)
def test_what_the_notation_or_megatron_core_refuses_is_refused(
    deep: Model, kw: dict[str, object], message: str
) -> None:
    with pytest.raises(PlanError, match=message):
        check(deep, _s(**kw))


def test_the_api_takes_the_layout() -> None:
    kw = {"nodes": 32, "tp": 8, "pp": 16, "global_batch": 32, "recompute": "full"}
    p = predict_model(DEEP, DGX_A100, interleave=2, pipeline_layout=LLAMA3, **kw)  # type: ignore[arg-type]
    assert p.to_dict()["pipeline_layout"] == LLAMA3
    with pytest.raises(PlanError, match="set interleave 2"):
        predict_model(DEEP, DGX_A100, pipeline_layout=LLAMA3, **kw)  # type: ignore[arg-type]


def test_the_api_takes_megatron_core_s_list_form_too() -> None:
    from stallscope.plan._pipeline_layout import layout_string

    chunks = [["embedding", *["decoder"] * 3], *[["decoder"] * 4] * 30, [*["t"] * 3, "loss"]]
    assert parse(layout_string(chunks)) == parse(LLAMA3)
    kw = {"nodes": 32, "tp": 8, "pp": 16, "global_batch": 32, "recompute": "full", "interleave": 2}
    listed = predict_model(DEEP, DGX_A100, pipeline_layout=chunks, **kw)  # type: ignore[arg-type]
    written = predict_model(DEEP, DGX_A100, pipeline_layout=LLAMA3, **kw)  # type: ignore[arg-type]
    assert listed.step_ns == written.step_ns
    with pytest.raises(PlanError, match="'encoder' is not a layer type"):
        layout_string([["embedding", "encoder"], ["loss"]])
    with pytest.raises(PlanError, match="or a list of chunks"):
        layout_string(["Et", "tL"])
