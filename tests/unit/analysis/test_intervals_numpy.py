"""The NumPy interval kernels of the stall table (Union, exclusive_arrays), checked against a
brute-force count of integer instants and against the Polars versions they replace."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope.analysis.stall._intervals import Union, exclusive, exclusive_arrays

pairs = st.lists(st.tuples(st.integers(-5, 40), st.integers(1, 12)), max_size=14)


def _arrays(ps: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    s = np.array([a for a, _ in ps], np.int64)
    return s, s + np.array([d for _, d in ps], np.int64)


def test_union_measures_overlapping_touching_and_nested() -> None:
    s, e = _arrays([(10, 10), (30, 10), (15, 2), (20, 5), (50, 1)])  # [10,20) [30,40) ...
    u = Union(s.copy(), e.copy())
    t = np.array([0, 10, 15, 20, 24, 25, 26, 35, 45, 50, 51, 99])
    # [10, 25) (touching [20, 25) merges), [30, 40), [50, 51)
    assert u.before(t).tolist() == [0, 0, 5, 10, 14, 15, 15, 20, 25, 25, 26, 26]
    assert u.intervals().rows() == [(10, 25), (30, 40), (50, 51)]


def test_union_of_nothing_and_read_only_inputs() -> None:
    none = np.zeros(0, np.int64)
    assert Union(none, none).before(np.array([1, 2])).tolist() == [0, 0]
    assert Union(none, none).intervals().height == 0
    s, e = _arrays([(5, 3), (0, 2)])
    s.flags.writeable = False
    e.flags.writeable = False
    u = Union(s, e)  # sorts copies; the inputs are left as they were
    assert s.tolist() == [5, 0] and u.before(np.array([10])).tolist() == [5]


@settings(max_examples=300, deadline=None)
@given(ps=pairs)
def test_union_matches_instant_counts(ps: list[tuple[int, int]]) -> None:
    s, e = _arrays(ps)
    covered = {t for a, b in zip(s.tolist(), e.tolist(), strict=True) for t in range(a, b)}
    u = Union(s.copy(), e.copy())
    t = np.arange(-10, 60)
    assert u.before(t).tolist() == [sum(1 for c in covered if c < x) for x in t.tolist()]
    merged = u.intervals().rows()
    assert all(a < b for a, b in merged)
    assert all(b < c for (_, b), (c, _) in itertools.pairwise(merged))
    assert {t for a, b in merged for t in range(a, b)} == covered


@settings(max_examples=300, deadline=None)
@given(
    ps=pairs,
    labels=st.lists(st.integers(0, 7), min_size=14, max_size=14),
    cuts=st.lists(st.integers(-10, 60), max_size=5),
)
def test_exclusive_arrays_matches_polars_and_the_smallest_label_per_instant(
    ps: list[tuple[int, int]], labels: list[int], cuts: list[int]
) -> None:
    s, e = _arrays(ps)
    lab = np.array(labels[: s.size], np.int32)
    c = np.array(cuts, np.int64)
    got_l, got_s, got_e = exclusive_arrays(lab, s, e, 8, c)
    got = list(zip(got_l.tolist(), got_s.tolist(), got_e.tolist(), strict=True))
    lf = pl.DataFrame(
        {"label": lab, "start": s, "end": e},
        schema={"label": pl.Int32, "start": pl.Int64, "end": pl.Int64},
    ).lazy()
    want = exclusive(lf, 8, pl.DataFrame({"t": c}, schema={"t": pl.Int64}).lazy()).collect()
    assert got == want.rows()
    # Per instant: the smallest label of the intervals holding it; segments split at cuts.
    for x in range(-10, 60):
        holding = [int(lb) for lb, a, b in zip(lab, s, e, strict=True) if a <= x < b]
        seg = [g for g in got if g[1] <= x < g[2]]
        assert [g[0] for g in seg] == ([min(holding)] if holding else [])
    assert not any(a < cut < b for _, a, b in got for cut in cuts)
