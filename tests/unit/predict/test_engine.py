"""The simulation engine: stream order, dependencies, waits, attribution."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope.predict._engine import CATEGORIES, Graph, SimulationError, attribute


def test_stream_order_and_dependencies() -> None:
    g = Graph()
    comp = g.stream("compute")
    comm = g.stream("comm")
    a = g.add(comp, 100)
    b = g.add(comp, 50)
    c = g.add(comm, 30, "network", deps=[a])  # overlaps b
    d = g.add(comm, 30, "network", deps=[b])  # after b, and after c on its stream
    t = g.run()
    assert (t.start[a], t.end[a]) == (0, 100)
    assert (t.start[b], t.end[b]) == (100, 150)
    assert (t.start[c], t.end[c]) == (100, 130)
    assert (t.start[d], t.end[d]) == (150, 180)
    cols = attribute(t, 0)
    assert cols["compute"] == 150
    assert cols["network"] == 30  # c hides behind b; d is exposed
    assert sum(cols.values()) == 180


def test_wait_on_other_class_is_sync_wait() -> None:
    g = Graph()
    fast, slow = g.rank_class("fast", 3), g.rank_class("slow", 1)
    f_comp, f_comm = g.stream("compute", fast), g.stream("comm", fast)
    s_comp, s_comm = g.stream("compute", slow), g.stream("comm", slow)
    fa = g.add(f_comp, 100)
    sa = g.add(s_comp, 160)
    fc = g.add(f_comm, 40, "interconnect", deps=[fa], wait_on=[sa])
    sc = g.add(s_comm, 40, "interconnect", deps=[sa], wait_on=[fa])
    t = g.run()
    assert t.start[fc] == t.start[sc] == 160
    assert t.ready[fc] == 100
    fast_cols = attribute(t, fast)
    assert fast_cols == {
        **dict.fromkeys(CATEGORIES, 0),
        "compute": 100,
        "sync_wait": 60,
        "interconnect": 40,
    }
    slow_cols = attribute(t, slow)
    assert slow_cols["sync_wait"] == 0 and slow_cols["compute"] == 160


def test_dependencies_added_later_are_ordered() -> None:
    g = Graph()
    s0, s1 = g.stream("stage0"), g.stream("stage1")
    # stage 1's forward waits for stage 0's, which is added after it
    f1 = g.add(s1, 10, wait_on=[1], wait_as="bubble")
    f0 = g.add(s0, 20)
    assert f0 == 1
    t = g.run()
    assert (t.start[f1], t.end[f1]) == (20, 30)
    cols = attribute(t, 0)
    assert cols["compute"] == 30 and cols["bubble"] == 0  # stage 0 computes meanwhile


def test_a_loop_is_an_error_naming_a_task() -> None:
    g = Graph()
    s0, s1 = g.stream("a"), g.stream("b")
    g.add(s0, 1, deps=[3], label="x")
    g.add(s0, 1, label="y")
    g.add(s1, 1, deps=[1], label="z")
    g.add(s1, 1, deps=[0], label="w")
    with pytest.raises(SimulationError, match="dependency loop"):
        g.run()


def test_bad_input_errors() -> None:
    g = Graph()
    s = g.stream("s")
    with pytest.raises(SimulationError, match="unknown category"):
        g.add(s, 1, "gpu")
    with pytest.raises(SimulationError, match="negative duration"):
        g.add(s, -1)
    with pytest.raises(SimulationError, match="unknown stream"):
        g.add(7, 1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # stream
            st.integers(0, 50),  # duration
            st.sampled_from(CATEGORIES[:-1]),
            st.lists(st.integers(0, 40), max_size=2),  # deps (filtered to earlier tasks)
        ),
        min_size=1,
        max_size=40,
    )
)
def test_columns_sum_to_the_step_and_respect_order(
    tasks: list[tuple[int, int, str, list[int]]],
) -> None:
    g = Graph()
    streams = [g.stream(f"s{k}") for k in range(3)]
    for i, (s, dur, cat, deps) in enumerate(tasks):
        g.add(streams[s], dur, cat, deps=[d for d in deps if d < i])
    t = g.run()
    cols = attribute(t, 0)
    assert sum(cols.values()) == t.class_end(0)
    for i in range(len(g)):
        assert t.end[i] - t.start[i] == g.duration[i]
        for d in g.deps[i]:
            assert t.start[i] >= t.end[d]
    # compute is the union of compute tasks
    iv = sorted((t.start[i], t.end[i]) for i in range(len(g)) if g.category[i] == "compute")
    union, hi = 0, -1
    for s, e in iv:
        if e > hi:
            union += e - max(s, hi)
            hi = e
    assert cols["compute"] == union
