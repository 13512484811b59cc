"""`_core.string_codes`: per row a code of its distinct string (csrc/arrow/string_codes.*), the
key the HTA views group and test names by. Checked against a dictionary in Python on columns
built every way they reach it: Polars' own strings, the importer's shared-table views, chunked
and sliced columns, Arrow's offset layouts, and columns of many copies of few strings (where
the view table is dropped)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope import _core
from stallscope._utils import arrow as _arrow


def _reference(values: list[str | None]) -> tuple[list[int], list[int]]:
    """(codes, first rows): codes in order of first appearance, None counted as ""."""
    seen: dict[str, int] = {}
    codes, first = [], []
    for i, v in enumerate(values):
        key = "" if v is None else v
        if key not in seen:
            seen[key] = len(seen)
            first.append(i)
        codes.append(seen[key])
    return codes, first


def _check(column: object, values: list[str | None]) -> None:
    codes, first, distinct = _core.string_codes(column)
    want_codes, want_first = _reference(values)
    assert codes.dtype == np.uint32 and first.dtype == np.int64
    assert codes.tolist() == want_codes
    assert first.tolist() == want_first
    # values[code]: the code's string, "" for null
    assert distinct == [values[i] or "" for i in want_first]


# Short (inline in a view: up to 12 bytes) and long strings, multi-byte characters, the 12/13
# byte boundary, strings equal but for their last byte.
words = st.sampled_from(
    ["", "a", "ab", "x" * 12, "x" * 13, "x" * 12 + "y", "é" * 6, "é" * 7, "ncclKernel_AllReduce"]
) | st.text(max_size=20)
values = st.lists(st.none() | words, max_size=60)


@settings(max_examples=150, deadline=None)
@given(values)
def test_codes_of_polars_strings(vals: list[str | None]) -> None:
    s = pl.Series(vals, dtype=pl.String)
    _check(s, vals)
    # Two chunks, and a slice (an offset into the views).
    _check(pl.concat([s, s], rechunk=False), vals + vals)
    _check(s[1:], vals[1:])


@settings(max_examples=100, deadline=None)
@given(st.lists(words, min_size=1, max_size=12, unique=True), st.data())
def test_codes_of_the_importers_shared_table_views(table: list[str], data: st.DataObject) -> None:
    picks = data.draw(st.lists(st.integers(-1, len(table) - 1), max_size=60))
    s = pl.Series(_arrow.strings(table, np.array(picks, dtype=np.int64)))
    _check(s, [None if p < 0 else table[p] for p in picks])


@settings(max_examples=60, deadline=None)
@given(values)
def test_codes_of_arrow_offset_layouts(vals: list[str | None]) -> None:
    for t in (pa.string(), pa.large_string()):
        a = pa.chunked_array([pa.array(vals, type=t), pa.array(vals[::-1], type=t)], type=t)
        _check(a, vals + vals[::-1])
        _check(a.slice(1), (vals + vals[::-1])[1:])


def test_many_copies_of_few_strings() -> None:
    # Every row its own copy: the views are all distinct, so past 65536 of them the coder drops
    # its view table and keys by content; codes must not change at that switch.
    vals: list[str | None] = [f"kernel_{i % 3}_" + "z" * 20 for i in range(70_000)]
    vals[69_999] = None
    vals[50] = "kernel_7_" + "z" * 20
    _check(pl.Series(vals), vals)


def test_other_types_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match=r"expected a string column.*got format l"):
        _core.string_codes(pl.Series([1, 2]))
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        _core.string_codes([1, 2])
