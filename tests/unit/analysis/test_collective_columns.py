"""match_collectives and stragglers on the collective columns (analysis/_collective_columns.py)
equal the Polars queries (the reference, taken for a LazyFrame) on random collectives."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from stallscope._schema import conform
from stallscope.analysis import match_collectives, stragglers
from stallscope.analysis._collective_columns import match_columns

_KEYS = ["group", "seq", "name", "rank"]


@st.composite
def collective_sets(draw: Any) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    nranks = draw(st.integers(1, 4))
    for r in range(nranks):
        for i, t in enumerate(sorted(draw(st.lists(st.integers(0, 300), max_size=4)))):
            rows.append({"rank": r, "kind": "step", "start_ns": t, "end_ns": t,
                         "correlation": None if draw(st.integers(0, 6)) == 0 else i})  # fmt: skip
        for _ in range(draw(st.integers(0, 12))):
            a = draw(st.integers(-20, 320))
            g = draw(st.sampled_from(["g0", "g1", "a", None]))
            detail = ";".join(
                ([f"group={g}"] if g else [])
                + ([f"group_size={draw(st.integers(1, 5))}"] if draw(st.booleans()) else [])
                + ([f"nnodes={draw(st.integers(1, 3))}"] if draw(st.booleans()) else [])
            )
            rows.append(
                {
                    "rank": draw(st.integers(0, nranks - 1)),
                    "kind": draw(st.sampled_from(["collective", "collective", "p2p"])),
                    "name": draw(st.sampled_from(["AllReduce", "AllGather", "send", "", None])),
                    "start_ns": a,
                    "end_ns": a + draw(st.integers(0, 60)),
                    "correlation": draw(st.sampled_from([0, 1, 2, None])),
                    "bytes": draw(st.integers(0, 9)),
                    "detail": detail if draw(st.integers(0, 8)) else None,
                }
            )
    if not rows:
        rows = [{"rank": 0, "kind": "step", "start_ns": 0, "end_ns": 0}]
    base = {"category": "comm", "name": "x", "detail": None, "correlation": 0, "bytes": 0}
    return conform(pl.DataFrame([{**base, **r} for r in rows], infer_schema_length=None)).collect()


def _same(got: pl.DataFrame, want: pl.DataFrame, keys: list[str]) -> None:
    """Equal rows in the same order of `keys` (the reference's sort keeps no order of ties)."""
    assert_frame_equal(got.select(keys), want.select(keys))
    every = got.columns
    assert_frame_equal(got.sort(every, nulls_last=False), want.sort(every, nulls_last=False))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(collective_sets())
def test_matching_on_columns_equals_the_reference(ev: pl.DataFrame) -> None:
    want = match_collectives(ev.lazy())
    got = match_columns(ev)
    if got is None:  # no collective with a group: the reference's empty frame is taken
        assert want.height == 0
        return
    _same(got[0], want, _KEYS)
    m = match_collectives(ev)
    _same(stragglers(ev, matched=m), stragglers(ev.lazy(), matched=want), ["step", "rank"])
    _same(stragglers(ev), stragglers(ev.lazy()), ["step", "rank"])
