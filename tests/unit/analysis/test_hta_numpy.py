"""The NumPy kernels behind the HTA views (merge_intervals, the correlation lookup, the overlap
sweep, the idle-time breakdown), checked against plain-Python and Polars reference
implementations of HTA's rules on generated rows: ties, touching and nested intervals, several
groups, string keys, GPU rows without a CPU partner and correlations shared by several CPU rows.
HTA's rows themselves (the last-step filter, launch times) are test_hta_rows_native.py's."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope._utils.sorted import int_order, lookup
from stallscope.analysis.hta._idle import idle_from_arrays
from stallscope.analysis.hta._loading import merge_intervals, sweep

interval_rows = st.lists(
    st.tuples(
        st.integers(0, 2),  # rank
        st.sampled_from(["COMPUTATION", "COMMUNICATION", "MEMORY"]),
        st.integers(0, 30),  # ts
        st.integers(0, 8),  # dur (0: an instant, which touches its neighbours)
    ),
    max_size=40,
)


def _merge_reference(rows: list[tuple[int, str, float, float]]) -> list[tuple[Any, ...]]:
    """HTA's merge_kernel_intervals, per (rank, type): sort by ts; an interval starts a new run
    when its ts exceeds every earlier end of the group."""
    out: list[tuple[Any, ...]] = []
    for key in sorted({(r, t) for r, t, _, _ in rows}):
        group = sorted((s, e) for r, t, s, e in rows if (r, t) == key)
        runs: list[list[float]] = []
        for s, e in group:
            if runs and s <= runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], e)
            else:
                runs.append([s, e])
        out += [(*key, s, e) for s, e in runs]
    return out


@settings(max_examples=200, deadline=None)
@given(interval_rows)
def test_merge_intervals_is_htas_merge_per_group(raw: list[tuple[int, str, int, int]]) -> None:
    rows = [(r, t, float(s), float(s + d)) for r, t, s, d in raw]
    df = pl.DataFrame(
        rows,
        schema={"rank": pl.Int32, "kernel_type": pl.String, "ts": pl.Float64, "end": pl.Float64},
        orient="row",
    )
    got = merge_intervals(df, by=["rank", "kernel_type"]).collect()
    assert got.columns == ["rank", "kernel_type", "ts", "end"]
    assert got.rows() == _merge_reference(rows)
    # One key column: the same rule per rank.
    one = merge_intervals(df, by="rank").collect().rows()
    assert one == [
        (r, s, e) for r, _, s, e in _merge_reference([(r, "", s, e) for r, _, s, e in rows])
    ]


def test_merge_intervals_of_no_rows_keeps_the_columns() -> None:
    df = pl.DataFrame(schema={"rank": pl.Int32, "ts": pl.Float64, "end": pl.Float64})
    got = merge_intervals(df).collect()
    assert got.height == 0 and got.columns == ["rank", "ts", "end"]


lookup_rows = st.lists(
    st.tuples(st.integers(0, 2), st.integers(-1, 6), st.booleans()), min_size=1, max_size=40
)


@settings(max_examples=200, deadline=None)
@given(lookup_rows)
def test_lookup_finds_every_partner_with_the_same_rank_and_correlation(
    raw: list[tuple[int, int, bool]],
) -> None:
    rank = np.array([r for r, _, _ in raw])
    corr = np.array([c for _, c, _ in raw])
    src = np.array([i for i, (_, _, s) in enumerate(raw) if s], dtype=np.int64)
    dst = np.array([i for i, (_, _, s) in enumerate(raw) if not s], dtype=np.int64)
    order, found, first, last = lookup(rank, corr, src, dst)
    for k, d in enumerate(dst):
        partners = [i for i in src if rank[i] == rank[d] and corr[i] == corr[d]]
        assert found[k] == bool(partners)
        if partners:  # first..last of the sorted src are exactly the partners, in row order
            assert src[order[first[k] : last[k] + 1]].tolist() == partners


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda k: st.lists(
            st.tuples(*[st.integers(-3, 400) for _ in range(k)]), min_size=0, max_size=60
        ).map(lambda rows, k=k: (k, rows))
    )
)
def test_int_order_is_lexsort(case: tuple[int, list[tuple[int, ...]]]) -> None:
    # Ranges up to 404^3: both paths (one combined 16-bit key, and lexsort beyond it).
    k, rows = case
    keys = [np.array([r[j] for r in rows], dtype=np.int64) for j in range(k)]
    assert int_order(*keys).tolist() == np.lexsort(keys).tolist()
    small = [(x % 7).astype(np.int32) for x in keys]  # the combined key's path, int32 keys
    assert int_order(*small).tolist() == np.lexsort(small).tolist()
    # Types where k - min overflows in the key's own type, or where int64 cannot hold the key.
    wide = [(x % 200 - 100).astype(np.int8) for x in keys]
    assert int_order(*wide).tolist() == np.lexsort(wide).tolist()
    high = [(x % 5).astype(np.uint64) + np.uint64(2**64 - 9) for x in keys]
    assert int_order(*high).tolist() == np.lexsort(high).tolist()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 30), st.integers(1, 8)),
        max_size=30,
    )
)
def test_sweep_labels_every_instant_with_the_kinds_running(
    raw: list[tuple[int, int, int, int]],
) -> None:
    df = pl.DataFrame(
        [(r, k, float(s), float(s + d)) for r, k, s, d in raw],
        schema={"rank": pl.Int32, "k": pl.Int64, "ts": pl.Float64, "end": pl.Float64},
        orient="row",
    )
    merged = merge_intervals(df, by=["rank", "k"]).collect()
    rank, label, dur = sweep(*(merged[c].to_numpy() for c in ("rank", "k", "ts", "end")))
    got: dict[tuple[int, int], float] = {}
    for r, lab, d in zip(rank.tolist(), label.tolist(), dur.tolist(), strict=True):
        if d:
            got[(r, lab)] = got.get((r, lab), 0.0) + d
    want: dict[tuple[int, int], float] = {}
    for r in {r for r, _, _, _ in raw}:
        for t in range(40):  # unit instants [t, t + 1): integer bounds make this exact
            lab = sum(
                1 << k
                for k in range(3)
                if any(rr == r and kk == k and s <= t < s + d for rr, kk, s, d in raw)
            )
            if lab:
                want[(r, lab)] = want.get((r, lab), 0.0) + 1.0
    assert got == want


def _idle_reference(rows: pl.DataFrame, delay: float) -> pl.DataFrame:
    """HTA's idle time breakdown with Polars window functions (the implementation the NumPy one
    replaced): per category sums and the stream's total."""
    prev_end = pl.col("end").shift(1).over("rank", "stream")
    return (
        rows.lazy()
        .sort("rank", "stream", "ts", maintain_order=True)
        .with_columns(prev_end=prev_end)
        .with_columns(idle=pl.col("ts") - pl.col("prev_end"))
        .with_columns(
            idle_category=pl.when((pl.col("ts_runtime") > pl.col("prev_end")).fill_null(False))
            .then(pl.lit("host_wait"))
            .when((pl.col("idle") < delay).fill_null(False))
            .then(pl.lit("kernel_wait"))
            .otherwise(pl.lit("other"))
        )
        .group_by("rank", "stream", "idle_category")
        .agg(idle=pl.col("idle").sum())
        .with_columns(total=pl.col("idle").sum().over("rank", "stream"))
        .sort("rank", "stream", "idle_category")
        .collect()
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1),  # rank
            st.integers(0, 2),  # stream
            st.integers(0, 60),  # ts
            st.integers(0, 10),  # dur
            st.one_of(st.none(), st.integers(0, 60)),  # ts_runtime
        ),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from([0.0, 3.0, 30.0]),
)
def test_idle_breakdown_matches_the_window_function_reference(
    raw: list[tuple[int, int, int, int, int | None]], delay: float
) -> None:
    rows = pl.DataFrame(
        [
            (r, s, float(t), float(t + d), None if rt is None else float(rt))
            for r, s, t, d, rt in raw
        ],
        schema={
            "rank": pl.Int32,
            "stream": pl.Int64,
            "ts": pl.Float64,
            "end": pl.Float64,
            "ts_runtime": pl.Float64,
        },
        orient="row",
    )
    got = idle_from_arrays(
        *(rows[c].to_numpy() for c in ("rank", "stream", "ts", "end")),
        rows["ts_runtime"].fill_null(np.nan).to_numpy(),
        delay,
    )
    want = _idle_reference(rows, delay)
    assert (
        got.select("rank", "stream", "idle_category").rows()
        == want.select("rank", "stream", "idle_category").rows()
    )
    assert got["idle_time_ns"].to_list() == [round(x * 1000) for x in want["idle"].to_list()]
    # The ratio by true division, as pandas (HTA) divides: Polars' column division can be one ulp
    # off it (41 / 40 -> 1.0250000000000001), which flips a rounding to 2 decimals.
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.round(want["idle"].to_numpy() / want["total"].to_numpy(), 2)
    assert np.array_equal(got["idle_time_ratio"].to_numpy(), ratio, equal_nan=True)
