"""The pipeline schedules on the engine: 1F1B and interleaved bubbles against their formulas
when communication is free, the compute order, micro-batches in flight."""

from __future__ import annotations

import pytest

from stallscope.plan._schedule import Shape, build, in_flight, stage_order
from stallscope.predict._engine import attribute


def _shape(p: int, m: int, v: int, nl: int = 1, **kw: bool) -> Shape:
    base = {"zero3": False, "dp_overlap": False, "tied": False, "param_gather": False}
    return Shape(p, m, v, nl, detail=False, **(base | kw))


@pytest.mark.parametrize(("p", "m"), [(1, 4), (2, 1), (4, 8), (4, 3), (8, 64), (3, 7)])
def test_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(p: int, m: int) -> None:
    sch = build(_shape(p, m, 1, nl=2))
    g = sch.graph
    g.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6})  # per layer: 1 us forward, 2 backward
    t = g.run()
    work = m * 2 * 3_000  # ns of compute per stage
    assert t.makespan == (m + p - 1) * 2 * 3_000
    for k in range(p):
        cols = attribute(t, k, t.makespan)
        assert cols["compute"] == work
        assert cols["bubble"] + cols["host"] == t.makespan - work
        assert (t.makespan - work) / t.makespan == pytest.approx((p - 1) / (m + p - 1))


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 16, 4), (8, 16, 3)])
def test_interleaved_bubble_is_the_1f1b_bubble_over_v(p: int, m: int, v: int) -> None:
    sch = build(_shape(p, m, v))
    g = sch.graph
    g.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6})  # per chunk of one layer
    t = g.run()
    stage_f_b = v * 3_000  # one micro-batch's forward + backward through a whole stage
    bubble = t.makespan - m * stage_f_b
    assert bubble == (p - 1) * stage_f_b // v


def test_1f1b_order_warm_up_steady_cool_down() -> None:
    assert stage_order(4, 6, 1, 0) == [
        ("F", 0, 0), ("F", 0, 1), ("F", 0, 2),
        ("F", 0, 3), ("B", 0, 0), ("F", 0, 4), ("B", 0, 1), ("F", 0, 5), ("B", 0, 2),
        ("B", 0, 3), ("B", 0, 4), ("B", 0, 5),
    ]  # fmt: skip
    assert stage_order(4, 6, 1, 3)[:4] == [("F", 0, 0), ("B", 0, 0), ("F", 0, 1), ("B", 0, 1)]
    assert [in_flight(stage_order(4, 6, 1, s)) for s in range(4)] == [4, 3, 2, 1]
    assert in_flight(stage_order(4, 2, 1, 0)) == 2  # never more than the micro-batches


def test_interleaved_order_visits_every_chunk_and_micro_batch_once() -> None:
    p, m, v = 4, 8, 3
    for s in range(p):
        order = stage_order(p, m, v, s)
        fwd = [(c, i) for op, c, i in order if op == "F"]
        bwd = [(c, i) for op, c, i in order if op == "B"]
        assert sorted(fwd) == sorted(bwd) == [(c, i) for c in range(v) for i in range(m)]
    # the first stage holds more chunk-micro-batches than 1F1B's p stages' worth
    assert in_flight(stage_order(p, m, v, 0)) == (p - 1) * 2 + (v - 1) * p + 1


def test_send_time_adds_to_the_pipeline_fill() -> None:
    p, m = 4, 8
    sch = build(_shape(p, m, 1))
    g = sch.graph
    g.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6, "send": 0.5e-6})
    t = g.run()
    # the first micro-batch's forward crosses p - 1 links and its backward p - 1 more
    assert t.makespan >= (m + p - 1) * 3_000 + 2 * (p - 1) * 500
    assert attribute(t, p - 1, t.makespan)["bubble"] > 0


def test_dp_gradients_overlap_the_last_backward() -> None:
    sch = build(_shape(1, 2, 1, nl=4, dp_overlap=True))
    g = sch.graph
    g.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6, "dp_layer": 1.5e-6})
    t = g.run()
    # 2 x 4 layers x 3 us of compute; per-layer gradient collectives of 1.5 us hide behind the
    # next layer's 2 us backward except the last one
    assert t.makespan == 24_000 + 1_500
    cols = attribute(t, 0, t.makespan)
    assert cols["network"] == 1_500


def test_blocking_gradients_follow_the_whole_backward() -> None:
    sch = build(_shape(1, 2, 1, nl=4, dp_overlap=True, dp_blocking=True))
    g = sch.graph
    g.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6, "dp_layer": 1.5e-6})
    t = g.run()
    # Megatron-LM's 2021 DDP: all 4 layers' gradients reduced after the backward, on the
    # compute stream: none of the 6 us hides
    assert t.makespan == 24_000 + 4 * 1_500
    assert attribute(t, 0, t.makespan)["network"] == 4 * 1_500


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 1), (4, 8, 2)])
def test_blocking_gradients_run_after_the_stages_last_backward(p: int, m: int, v: int) -> None:
    sch = build(_shape(p, m, v, nl=2, dp_overlap=True, dp_blocking=True))
    g = sch.graph
    g.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6, "dp_layer": 1e-6})
    t = g.run()
    free = build(_shape(p, m, v, nl=2))
    free.graph.duration[:] = free.durations({"f": 1e-6, "b": 2e-6})
    # each stage's reduction follows all its backwards: it delays no other stage's work, so the
    # step grows by one stage's reduction (2 layers x v chunks x 1 us) exactly
    assert t.makespan == free.graph.run().makespan + 2 * v * 1_000


def test_zero3_gathers_hide_behind_compute_but_the_first() -> None:
    sch = build(_shape(1, 1, 1, nl=4, zero3=True))
    g = sch.graph
    g.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6, "zero_ag": 0.5e-6})
    t = g.run()
    # the first forward gather (0.5 us) is exposed; later ones run a layer ahead
    assert t.makespan == 500 + 4 * 3_000


@pytest.mark.parametrize(
    ("p", "m", "v", "nl", "flags"),
    [
        (1, 3, 1, 4, {}),
        (4, 8, 1, 3, {"dp_overlap": True, "tied": True}),
        (4, 8, 2, 2, {"dp_overlap": True, "param_gather": True}),
        (3, 6, 3, 10, {"zero3": True}),
        (2, 4, 1, 16, {"zero3": True, "tied": True}),
        (8, 16, 4, 1, {"dp_overlap": True, "tied": True, "param_gather": True}),
        (4, 8, 2, 2, {"p2p_blocking": True, "dp_overlap": True}),
        (3, 5, 1, 3, {"p2p_blocking": True, "zero3": True}),
        (4, 8, 2, 2, {"dp_overlap": True, "dp_blocking": True, "tied": True}),
        (1, 4, 1, 8, {"dp_overlap": True, "dp_blocking": True, "p2p_blocking": True}),
        (2, 4, 1, 4, {"zero3": True, "dp_blocking": True, "tied": True}),
        (1, 2, 1, 8, {"zero3": True, "gather_after_backward": True}),
        (3, 6, 2, 4, {"zero3": True, "gather_after_backward": True, "tied": True}),
    ],
)
@pytest.mark.parametrize("detail", [False, True])
def test_the_native_graph_is_the_reference_graph(
    p: int, m: int, v: int, nl: int, flags: dict[str, bool], detail: bool
) -> None:
    from stallscope.plan._predict import native_schedule

    base = {"zero3": False, "dp_overlap": False, "tied": False, "param_gather": False}
    shape = Shape(p, m, v, nl, detail=detail, **(base | flags))
    ref, nat = build(shape), native_schedule(shape)
    assert nat.graph.stream_of == ref.graph.stream_of
    assert [s.rank_class for s in nat.graph.streams] == [s.rank_class for s in ref.graph.streams]
    assert nat.slot == ref.slot and nat.mult == ref.mult
    assert nat.graph.deps == ref.graph.deps
    assert nat.graph.wait_on == ref.graph.wait_on
    assert nat.graph.category == ref.graph.category
    assert nat.in_flight == ref.in_flight


@pytest.mark.parametrize(("p", "m", "v"), [(2, 8, 1), (4, 16, 1), (4, 8, 2)])
def test_blocking_sends_hold_the_sender(p: int, m: int, v: int) -> None:
    def step(blocking: bool, send: float) -> tuple[int, int]:
        sch = build(_shape(p, m, v, p2p_blocking=blocking))
        sch.graph.duration[:] = sch.durations({"f": 1e-6, "b": 2e-6, "send": send})
        t = sch.graph.run()
        return t.makespan, attribute(t, 0, t.makespan)["interconnect"]

    assert step(True, 0.0) == step(False, 0.0)  # free sends: the same schedule
    (blocked, on_stage0), (free, hidden) = step(True, 0.5e-6), step(False, 0.5e-6)
    assert blocked > free
    # stage 0's sends run on its compute stream: every one shows: m x v forwards, and the
    # backward of every chunk but the first goes back to the last stage
    assert on_stage0 == m * (2 * v - 1) * 500 > hidden


def test_fsdp_backward_post_waits_for_each_gather_in_the_backward() -> None:
    """BACKWARD_POST gathers a layer's weights only once the layer after has its gradients: the
    forward still hides its gathers, the backward pays one per layer (here 1 us each)."""

    def step(post: bool) -> int:
        sch = build(_shape(1, 1, 1, nl=8, zero3=True, gather_after_backward=post))
        sch.graph.duration[:] = sch.durations({"f": 2e-6, "b": 4e-6, "zero_ag": 1e-6})
        return sch.graph.run().makespan

    pre, post = step(False), step(True)
    assert pre == 8 * (2_000 + 4_000) + 1_000  # the first layer's gather alone shows
    assert post == pre + 8 * 1_000  # every backward gather shows
