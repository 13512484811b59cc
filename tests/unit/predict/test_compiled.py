"""The native engine run equals the Python engine (the reference) on random graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope.predict._compiled import CompiledGraph
from stallscope.predict._engine import CATEGORIES, Graph, SimulationError


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # stream
            st.integers(0, 60),  # duration
            st.lists(st.integers(0, 50), max_size=2),  # deps
            st.lists(st.integers(0, 50), max_size=2),  # wait_on
        ),
        min_size=1,
        max_size=50,
    ),
    st.integers(0, 1),
)
def test_native_run_equals_the_python_engine(
    tasks: list[tuple[int, int, list[int], list[int]]], backwards: int
) -> None:
    g = Graph()
    a, b = g.rank_class("a"), g.rank_class("b")
    streams = [g.stream(f"s{k}", a if k < 2 else b) for k in range(4)]
    n = len(tasks)
    for i, (s, dur, deps, waits) in enumerate(tasks):
        # forward references when `backwards` (run() must order them), never a loop
        ok = (lambda d, i=i: d > i) if backwards and s == 3 else (lambda d, i=i: d < i)
        g.add(
            streams[s],
            dur,
            CATEGORIES[i % 3],
            deps=[d for d in deps if d < n and ok(d) and tasks[d][0] != 3],
            wait_on=[d for d in waits if d < n and ok(d) and tasks[d][0] != 3],
        )
    ref = g.run()
    c = CompiledGraph.of(g)
    got = c.run()
    assert (got.start, got.end, got.ready) == (ref.start, ref.end, ref.ready)
    doubled = np.asarray(g.duration) * 2
    spans = c.makespans(np.stack([np.asarray(g.duration), doubled]))
    assert spans[0] == ref.makespan
    g.duration[:] = doubled.tolist()
    assert spans[1] == g.run().makespan


def test_a_loop_is_the_engines_error_and_bad_shapes_are_refused() -> None:
    g = Graph()
    s = g.stream("s")
    g.add(s, 1, deps=[1])
    g.add(s, 1)
    with pytest.raises(SimulationError, match="dependency loop"):
        CompiledGraph.of(g)
    h = Graph()
    h.add(h.stream("s"), 5)
    c = CompiledGraph.of(h)
    with pytest.raises(ValueError, match="durations must be"):
        c.makespans(np.zeros((2, 3)))
    assert c.makespans(np.array([[7], [9]])).tolist() == [7, 9]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.integers(0, 60),
            st.sampled_from((*CATEGORIES[:-1], "none")),
            st.sampled_from(CATEGORIES[:-1]),
            st.lists(st.integers(0, 50), max_size=2),
        ),
        min_size=1,
        max_size=50,
    ),
    st.one_of(st.none(), st.integers(0, 400)),
)
def test_fast_attribution_equals_the_engines(
    tasks: list[tuple[int, int, str, str, list[int]]], step_end: int | None
) -> None:
    from stallscope.predict._compiled import attribute_fast
    from stallscope.predict._engine import attribute

    g = Graph()
    a, b = g.rank_class("a"), g.rank_class("b")
    streams = [g.stream(f"s{k}", a if k < 2 else b) for k in range(4)]
    for i, (s, dur, cat, wait_as, waits) in enumerate(tasks):
        g.add(streams[s], dur, cat, wait_on=[d for d in waits if d < i], wait_as=wait_as)
    t = g.run()
    for cls in (a, b):
        assert attribute_fast(t, cls, step_end) == attribute(t, cls, step_end)
