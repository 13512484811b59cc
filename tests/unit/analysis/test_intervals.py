"""Interval algebra on one timeline, checked against a brute-force count of integer instants."""

from __future__ import annotations

from itertools import pairwise

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope.analysis.stall._intervals import (
    difference,
    flatten_offsets,
    measure_before,
    measure_within,
    merge,
)


def frame(pairs: list[tuple[int, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"start": [a for a, _ in pairs], "end": [b for _, b in pairs]},
        schema={"start": pl.Int64, "end": pl.Int64},
    )


def covered(pairs: list[tuple[int, int]]) -> set[int]:
    return {t for a, b in pairs for t in range(a, b)}


def test_merge_overlapping_touching_nested_and_empty() -> None:
    got = merge(frame([(5, 8), (0, 3), (3, 4), (6, 7), (10, 10), (12, 11), (9, 15), (14, 20)]))
    assert got.collect().rows() == [(0, 4), (5, 8), (9, 20)]


def test_merge_of_nothing_is_empty() -> None:
    assert merge(frame([])).collect().height == 0


def test_measure_before_points_inside_between_and_outside() -> None:
    merged = merge(frame([(10, 20), (30, 40)]))
    points = pl.DataFrame({"t": [0, 10, 15, 20, 25, 35, 50]}).lazy()
    got = measure_before(merged, points).collect()["measure"].to_list()
    assert got == [0, 0, 5, 10, 10, 15, 20]


def test_measure_within_windows() -> None:
    merged = merge(frame([(10, 20), (30, 40)]))
    windows = frame([(0, 12), (12, 35), (35, 100)]).lazy()
    assert measure_within(merged, windows).collect()["measure"].to_list() == [2, 13, 5]


def test_difference_and_cuts() -> None:
    a = merge(frame([(0, 10), (20, 30)]))
    b = merge(frame([(2, 4), (8, 22)]))
    assert difference(a, b).collect().rows() == [(0, 2), (4, 8), (22, 30)]
    cuts = pl.DataFrame({"t": [25, 1]}, schema={"t": pl.Int64}).lazy()
    assert difference(a, b, cuts).collect().rows() == [(0, 1), (1, 2), (4, 8), (22, 25), (25, 30)]


def test_flatten_offsets_lays_ranges_end_to_end() -> None:
    bounds = pl.DataFrame({"rank": [0, 1], "lo": [1000, 500], "hi": [1100, 800]})
    got = flatten_offsets(bounds)
    flat = [(lo + o, hi + o) for lo, hi, o in got.select("lo", "hi", "offset").rows()]
    assert flat == [(0, 100), (100, 400)]


intervals = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(a=intervals, b=intervals, windows=st.lists(st.integers(0, 45), max_size=6))
def test_algebra_matches_instant_counts(
    a: list[tuple[int, int]], b: list[tuple[int, int]], windows: list[int]
) -> None:
    ua, ub = merge(frame(a)), merge(frame(b))
    ca, cb = covered(a), covered(b)
    got_a = ua.collect().rows()
    assert covered(got_a) == ca
    assert all(s < e for s, e in got_a)
    assert all(e1 < s2 for (_, e1), (s2, _) in pairwise(got_a))
    diff = difference(ua, ub).collect().rows()
    assert covered(diff) == ca - cb
    assert sum(e - s for s, e in diff) == len(ca - cb)
    edges = sorted(set(windows))
    wins = list(pairwise(edges))
    if wins:
        m = measure_within(ua, frame(wins).lazy()).collect()["measure"].to_list()
        assert m == [len(ca & set(range(s, e))) for s, e in wins]
