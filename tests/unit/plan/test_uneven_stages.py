"""Uneven pipeline splits (Megatron's first / last stage layer counts): the rule and its errors,
the schedule, the per-stage costs and memory against the even split."""

from __future__ import annotations

import pytest

from stallscope.plan import Cluster, Model, PlanError, Strategy, predict_model
from stallscope.plan._pipeline_split import stage_layers
from stallscope.plan._predict import predict_strategy
from stallscope.plan._schedule import Shape, build
from stallscope.plan._strategy import check
from stallscope.predict._engine import attribute

from .conftest import DGX_A100, GPT3


def _gpt3(**kw: object) -> Strategy:
    """GPT-3 175B (96 layers) on 8 stages of TP 8, 2 replicas, full recompute."""
    base: dict[str, object] = {
        "tp": 8, "pp": 8, "dp": 2, "global_batch": 64, "recompute": "full",
    }  # fmt: skip
    return Strategy(**(base | kw))  # type: ignore[arg-type]


def test_the_middle_stages_split_the_rest_evenly(gpt3: Model) -> None:
    assert stage_layers(gpt3, _gpt3()) == (12,) * 8
    both = _gpt3(first_stage_layers=9, last_stage_layers=9)
    check(gpt3, both)
    assert stage_layers(gpt3, both) == (9, *(13,) * 6, 9)
    first = _gpt3(first_stage_layers=5)  # 91 left over 7 stages
    check(gpt3, first)
    assert stage_layers(gpt3, first) == (5, *(13,) * 7)
    last = _gpt3(last_stage_layers=26)  # 70 over 7 stages: 10 each
    check(gpt3, last)
    assert stage_layers(gpt3, last) == (*(10,) * 7, 26)
    assert sum(stage_layers(gpt3, both)) == gpt3.layers


def test_a_rest_that_does_not_split_names_the_nearest_counts(gpt3: Model) -> None:
    with pytest.raises(
        PlanError,
        match=r"83 layers left do not split evenly over the 6 middle stages .*Megatron-Core.*"
        r"first-stage layers 1, 7, 13; or last-stage layers 4, 10, 16; or equal first and "
        r"last of 6, 9, 12",
    ):
        check(gpt3, _gpt3(first_stage_layers=8, last_stage_layers=5))


def test_interleaving_needs_every_stage_count_to_divide_by_it(gpt3: Model) -> None:
    # 6 + 6 + 6 x 14: every count divides by 2, not by 4
    check(gpt3, _gpt3(first_stage_layers=6, last_stage_layers=6, interleave=2))
    with pytest.raises(
        PlanError, match=r"first stage's 6 layers must divide by the interleave \(4\).*interleave"
    ):
        check(gpt3, _gpt3(first_stage_layers=6, last_stage_layers=6, interleave=4))
    # 4 + 4 + 88 / 6: the rest does not even split
    with pytest.raises(PlanError, match="do not split evenly"):
        check(gpt3, _gpt3(first_stage_layers=4, last_stage_layers=4, interleave=2))
    # 10 + 10 + 76 / 6 ... and 9 + 9 + 13 x 6 with v = 2: the middle's 13 is odd
    with pytest.raises(PlanError, match=r"first stage's 9 layers must divide"):
        check(gpt3, _gpt3(first_stage_layers=9, last_stage_layers=9, interleave=2))
    with pytest.raises(PlanError, match=r"middle stages' 13 layers must divide by the interleave"):
        check(gpt3, _gpt3(first_stage_layers=10, last_stage_layers=8, interleave=2))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"pp": 1, "dp": 16, "first_stage_layers": 4}, "need pp > 1"),
        ({"first_stage_layers": 0}, "at least one layer, got 0"),
        ({"first_stage_layers": 96}, "0 layers are left for the 7 middle stage"),
        ({"first_stage_layers": 90, "last_stage_layers": 7}, "-1 layers are left"),
        ({"pp": 2, "dp": 8, "first_stage_layers": 40, "last_stage_layers": 50}, "none may be left"),
        ({"first_stage_layers": 2.5}, "must be a whole number"),
    ],
)
def test_impossible_splits_are_refused(gpt3: Model, kw: dict[str, object], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        check(gpt3, _gpt3(**kw))


def _shape(stage_layers: tuple[int, ...], nl: int, m: int = 8, **kw: bool) -> Shape:
    base = {"zero3": False, "dp_overlap": False, "tied": False, "param_gather": False}
    return Shape(4, m, 1, nl, detail=False, stage_layers=stage_layers, **(base | kw))


def _step(shape: Shape) -> tuple[int, list[int]]:
    sch = build(shape)
    sch.graph.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6})  # per layer
    t = sch.graph.run()
    return t.makespan, [attribute(t, k, t.makespan)["compute"] for k in range(shape.pp)]


def test_lighter_end_stages_run_their_own_layers_and_shorten_the_step() -> None:
    even2, _ = _step(_shape((), 2))
    even3, _ = _step(_shape((), 3))
    step, compute = _step(_shape((2, 3, 3, 2), 3))
    assert compute == [8 * n * 3_000 for n in (2, 3, 3, 2)]  # m x layers x (1 + 2) us
    assert even2 < step < even3  # the middle stages set the pace, the ends fill faster
    assert even3 == (8 + 4 - 1) * 3 * 3_000  # 1F1B with free communication


def test_an_uneven_split_equal_to_the_even_one_predicts_the_same(
    gpt3: Model, a100: Cluster
) -> None:
    m = gpt3
    even = predict_strategy(m, a100, _gpt3())
    same = predict_strategy(m, a100, _gpt3(first_stage_layers=12, last_stage_layers=12))
    assert same.step_ns == even.step_ns and same.memory.total == even.memory.total


def test_heavier_middle_stages_slow_the_step_and_load_their_memory(
    gpt3: Model, a100: Cluster
) -> None:
    even = predict_strategy(gpt3, a100, _gpt3())
    light = predict_strategy(gpt3, a100, _gpt3(first_stage_layers=9, last_stage_layers=9))
    heavy = predict_strategy(gpt3, a100, _gpt3(first_stage_layers=15, last_stage_layers=15))
    # 13 layers in the middle (9 at the ends) against 12: the middle stages set the pace
    assert light.step_ns > even.step_ns
    comp = [st["compute_ns"] for st in light.stages]
    assert comp[0] < comp[1] == comp[6] > comp[7]
    assert comp[1] > even.stages[1]["compute_ns"]
    # memory: a middle stage with 13 layers holds the most; with 15 at the ends, stage 0
    assert light.memory.stage not in (0, 7) and light.memory.weights > even.memory.weights
    assert heavy.memory.stage == 0 and heavy.memory.total > even.memory.total
    assert heavy.step_ns > even.step_ns  # 15-layer ends are the slowest now
    assert light.to_dict()["first_stage_layers"] == 9
    assert light.strategy.label().endswith(".first9.last9")


def test_the_api_checks_the_counts() -> None:
    sys_ = DGX_A100
    with pytest.raises(PlanError, match="first_stage_layers must be a whole number >= 1"):
        predict_model(GPT3, sys_, nodes=16, tp=8, pp=8, global_batch=64, first_stage_layers=0)
    p = predict_model(
        GPT3, sys_, nodes=16, tp=8, pp=8, global_batch=64, recompute="full",
        first_stage_layers=9, last_stage_layers=9,
    )  # fmt: skip
    assert p.strategy.first_stage_layers == 9 and p.strategy.last_stage_layers == 9
