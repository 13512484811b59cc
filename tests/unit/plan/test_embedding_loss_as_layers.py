"""The embedding and the loss as pipeline layers (Megatron-Core's
account_for_embedding/loss_in_pipeline_split): the rule and its errors, per-chunk layer counts in
the schedule (native and reference alike), the step, memory and the API."""

from __future__ import annotations

from typing import Any

import pytest

from stallscope.plan import Cluster, Model, PlanError, Strategy, load_model, predict_model
from stallscope.plan._pipeline_split import chunk_layers, stage_layers
from stallscope.plan._predict import native_schedule, predict_strategy
from stallscope.plan._schedule import SLOTS, Shape, build, in_flight_counts, layers_in_flight
from stallscope.plan._strategy import check
from stallscope.predict._engine import attribute

from .conftest import DEEP, DGX_A100, GPT3

# DEEP's 126 layers + the embedding and the loss = 128 = 8 stages x 8 chunks of 2


def _s(**kw: object) -> Strategy:
    """8 stages of TP 8, 2 replicas, interleave 8, both as layers, full recompute."""
    base: dict[str, object] = {
        "tp": 8, "pp": 8, "dp": 2, "global_batch": 64, "recompute": "full", "interleave": 8,
        "embedding_as_layer": True, "loss_as_layer": True,
    }  # fmt: skip
    return Strategy(**(base | kw))  # type: ignore[arg-type]


def test_the_first_and_last_chunk_hold_one_layer_fewer(deep: Model) -> None:
    s = _s()
    check(deep, s)
    chunks = chunk_layers(deep, s)
    assert chunks[0] == (1, *(2,) * 7) and chunks[-1] == (*(2,) * 7, 1)
    assert all(c == (2,) * 8 for c in chunks[1:-1])
    assert stage_layers(deep, s) == (15, *(16,) * 6, 15) and sum(stage_layers(deep, s)) == 126
    # without interleaving: 126 + 2 over 8 stages of 16, the ends one fewer
    flat = _s(interleave=1)
    check(deep, flat)
    assert stage_layers(deep, flat) == (15, *(16,) * 6, 15)
    # GPT-3's 96 layers: with both, 98 = 7 x 14 (the even split has no pp 7); with the loss
    # alone, 97 is prime
    gpt3 = load_model(GPT3)
    both7 = _s(pp=7, dp=2, interleave=1)
    check(gpt3, both7)
    assert stage_layers(gpt3, both7) == (13, *(14,) * 5, 13)
    loss = _s(pp=2, dp=2, interleave=1, embedding_as_layer=False)
    with pytest.raises(PlanError, match="97 layers do not split evenly"):
        check(gpt3, loss)
    assert s.label().endswith(".v8.emb-layer.loss-layer")
    assert _s(embedding_as_layer=False).label().endswith(".v8.loss-layer")


def test_a_split_that_does_not_divide_names_the_rule_and_the_nearest_choices(
    deep: Model,
) -> None:
    with pytest.raises(
        PlanError,
        match=r"126 \+ 1 \(embedding\) = 127 layers, pp=8, interleave=8\): the 127 layers do not "
        r"split evenly over the 8 pipeline stages \(Megatron-Core's rule for "
        r"account_for_embedding/loss_in_pipeline_split\); nearest valid: embedding and loss as a "
        r"layer",
    ):
        check(deep, _s(loss_as_layer=False))
    with pytest.raises(
        PlanError,
        match=r"each stage's 16 layers must divide by the interleave \(3\).*nearest valid: "
        r"interleave 1, 2, 4",
    ):
        check(deep, _s(interleave=3))
    with pytest.raises(PlanError, match=r"over the 6 pipeline stages.*nearest valid: pp 2, 4, 8"):
        check(deep, _s(pp=6, dp=3, global_batch=48))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"first_stage_layers": 15}, "exclude each other .*give one or the other"),
        ({"interleave": 1, "last_stage_layers": 15}, "exclude each other"),
        ({"embedding_as_layer": 1}, "embedding_as_layer must be true or false, got 1"),
        ({"loss_as_layer": "yes"}, "loss_as_layer must be true or false"),
    ],
)
def test_what_megatron_core_refuses_is_refused(
    deep: Model, kw: dict[str, object], message: str
) -> None:
    with pytest.raises(PlanError, match=message):
        check(deep, _s(**kw))


def _shape(chunks: tuple[tuple[int, ...], ...], **kw: bool) -> Shape:
    base = {"zero3": False, "dp_overlap": False, "tied": False, "param_gather": False}
    return Shape(4, 8, 2, 2, detail=False, chunk_layers=chunks, **(base | kw))


def test_lighter_end_chunks_lighten_the_end_stages_and_the_step() -> None:
    def step(shape: Shape) -> tuple[int, list[int]]:
        sch = build(shape)
        sch.graph.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6})  # per layer
        t = sch.graph.run()
        return t.makespan, [attribute(t, k, t.makespan)["compute"] for k in range(shape.pp)]

    even, even_comp = step(_shape(()))
    light, comp = step(_shape(((1, 2), (2, 2), (2, 2), (2, 1))))
    # m x layers x (1 + 2) us: one layer fewer on each end stage, once per micro-batch
    assert even_comp == [8 * 4 * 3_000] * 4
    assert comp == [8 * n * 3_000 for n in (3, 4, 4, 3)]
    assert light < even


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"dp_overlap": True, "tied": True, "param_gather": True},
        {"zero3": True},
        {"dp_overlap": True, "dp_blocking": True, "p2p_blocking": True},
    ],
)
@pytest.mark.parametrize("detail", [False, True])
@pytest.mark.parametrize(
    ("split", "per_stage"),
    [
        # a chunk may hold no layer (the embedding alone)
        ({"chunk_layers": ((0, 4), (4, 4), (4, 4), (4, 3))}, [4, 8, 8, 7]),
        ({"stage_layers": (3, 4, 4, 2)}, None),  # uneven stages, even chunks
    ],
)
def test_the_native_graph_scales_stages_and_chunks_as_the_reference(
    flags: dict[str, bool], detail: bool, split: dict[str, Any], per_stage: list[int] | None
) -> None:
    base = {"zero3": False, "dp_overlap": False, "tied": False, "param_gather": False}
    shape = Shape(4, 8, 2, 4, detail=detail, **split, **(base | flags))
    ref, nat = build(shape), native_schedule(shape)
    assert nat.slot == ref.slot and nat.mult == ref.mult and nat.chunk == ref.chunk
    assert nat.graph.deps == ref.graph.deps and nat.graph.wait_on == ref.graph.wait_on
    assert ref.mult != build(Shape(4, 8, 2, 4, detail=detail, **(base | flags))).mult
    opt = [k for k, sl in enumerate(ref.slot) if SLOTS[sl] == "opt_layer"]
    assert all(ref.chunk[k] == -1 for k in opt)
    if per_stage is not None:  # stage 0's optimizer counts its 4 layers, not 2 chunks of 4
        assert [ref.mult[k] for k in opt] == per_stage


def test_the_layers_held_follow_the_compute_order() -> None:
    inflight = in_flight_counts(4, 8, 2)
    assert layers_in_flight(4, 8, 2, 1, (2, 2)) == inflight[1] * 2
    # stage 0 holds its 1-layer chunk's forwards for pp micro-batches before the 2-layer chunk's
    held = layers_in_flight(4, 8, 2, 0, (1, 2))
    assert inflight[0] < held < inflight[0] * 2


def test_the_end_stages_run_lighter_than_a_128_layer_even_split(deep: Model, a100: Cluster) -> None:
    even128 = predict_strategy(load_model(DEEP | {"layers": 128}), a100, _s(
        embedding_as_layer=False, loss_as_layer=False
    ))  # fmt: skip
    p = predict_strategy(deep, a100, _s())
    comp = [st["compute_ns"] for st in p.stages]
    ref = [st["compute_ns"] for st in even128.stages]
    assert comp[0] < ref[0] and comp[-1] < ref[-1]
    assert comp[1:-1] == pytest.approx(ref[1:-1], rel=1e-3)
    assert comp[0] < comp[1] and comp[-1] < comp[-2]
    assert p.step_ns < even128.step_ns
    assert p.memory.total < even128.memory.total  # 15-layer ends, the middle as the even 16
    d = p.to_dict()
    assert d["embedding_as_layer"] is True and d["loss_as_layer"] is True


def test_the_api_takes_the_keywords() -> None:
    p = predict_model(
        DEEP, DGX_A100, nodes=16, tp=8, pp=8, global_batch=64, recompute="full", interleave=8,
        embedding_as_layer=True, loss_as_layer=True,
    )  # fmt: skip
    assert p.strategy.embedding_as_layer and p.strategy.loss_as_layer
    with pytest.raises(PlanError, match="127 layers do not split evenly"):
        predict_model(
            DEEP, DGX_A100, nodes=16, tp=8, pp=8, global_batch=64, interleave=8,
            embedding_as_layer=True,
        )  # fmt: skip
