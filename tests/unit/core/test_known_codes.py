"""`_arrow.remember_codes` / `known_codes`: the codes of a string column the Kineto import made
from its name table, handed to the HTA views instead of `_core.string_codes` re-reading every
row; and `_core.column_key`, which tells that a column is the one remembered."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stallscope
from stallscope import _core
from stallscope._utils import arrow as _arrow
from stallscope.analysis import (
    idle_time_breakdown,
    kernel_breakdown,
    kernel_type_breakdown,
    temporal_breakdown,
)
from stallscope.analysis.hta import _loading as _hta_loading

DATA = Path(__file__).resolve().parents[2] / "data" / "kineto"
TRACE = DATA / "h200_transformer_1rank"


def _frame(table: list[str], codes: np.ndarray) -> pl.DataFrame:
    frame = _arrow.frame_of([_arrow.strings(table, codes, "name")])
    _arrow.remember_codes(frame, "name", table, codes)
    return frame


def _same_partition(codes: np.ndarray, values: list[str], want: list[str]) -> None:
    """codes / values describe the strings `want`: values[code] per row, values distinct."""
    assert codes.dtype == np.uint32
    assert len(set(values)) == len(values)
    assert [values[c] for c in codes.tolist()] == want


# Tables with repeats: the import's table can hold a value twice ("" or a collective's name).
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["", "a", "nccl:all_reduce", "x" * 20, "é" * 9]), min_size=1),
    st.data(),
)
def test_known_codes_match_the_rows(table: list[str], data: st.DataObject) -> None:
    n = len(table)
    codes = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=40)), dtype=np.int32)
    frame = _frame(table, codes)
    got = _arrow.known_codes(frame.get_column("name"))
    assert got is not None
    want = [table[c] for c in codes.tolist()]
    _same_partition(*got, want)
    # What string_codes gives, up to the numbering.
    ref_codes, _, ref_values = _core.string_codes(frame.get_column("name"))
    _same_partition(ref_codes, ref_values, want)


def test_column_key_is_the_buffers_not_the_export() -> None:
    frame = _frame(["short", "a value longer than twelve bytes"], np.array([0, 1, 1, 0], np.int32))
    key = _core.column_key(frame.get_column("name"))
    assert key is not None and key[:4] == ("vu", 4, 0, 0)
    assert all(_core.column_key(frame["name"]) == key for _ in range(5))
    assert _core.column_key(frame.select("name")["name"]) == key  # the same buffers
    assert _core.column_key(frame["name"].slice(1, 2)) != key  # another window
    assert _core.column_key(pl.Series(["short", "a value longer than twelve bytes"] * 2)) != key
    chunked = pl.concat([frame["name"], frame["name"]], rechunk=False)
    assert _core.column_key(chunked) is None
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        _core.column_key(["not", "a", "column"])


def test_other_columns_are_not_known() -> None:
    table = ["a", "b", "c"]
    frame = _frame(table, np.array([2, 0, 1, 2], np.int32))
    name = frame.get_column("name")
    assert _arrow.known_codes(name.slice(1)) is None
    assert _arrow.known_codes(name.filter(name != "b")) is None
    assert _arrow.known_codes(pl.Series(["c", "a", "b", "c"])) is None  # equal, not the same
    assert _arrow.known_codes(pl.Series([1, 2, 3])) is None
    # A null row (a negative code): string_codes reads it as "", so it is left to string_codes.
    nulls = _frame(table, np.array([0, -1, 2], np.int32))
    assert _arrow.known_codes(nulls.get_column("name")) is None


def test_an_entry_lasts_as_long_as_its_frame() -> None:
    before = len(_arrow._KNOWN)
    frame = _frame(["a", "b"], np.array([0, 1, 0], np.int32))
    kept = frame.select("name")  # shares the column
    assert len(_arrow._KNOWN) == before + 1
    del frame
    gc.collect()
    assert len(_arrow._KNOWN) == before
    assert _arrow.known_codes(kept.get_column("name")) is None


@pytest.mark.skipif(not TRACE.exists(), reason="the repository's small H200 trace is missing")
def test_views_of_an_import_are_the_same_with_and_without_its_codes() -> None:
    events = stallscope.import_kineto(TRACE)
    got = _arrow.known_codes(events.get_column("name"))
    assert got is not None  # the import remembered its name column
    _same_partition(*got, events.get_column("name").to_list())
    views = (temporal_breakdown, idle_time_breakdown, kernel_type_breakdown, kernel_breakdown)
    with_codes = [view(events) for view in views]
    _hta_loading._CACHE.clear()
    _arrow._KNOWN.clear()  # string_codes again
    assert _arrow.known_codes(events.get_column("name")) is None
    for view, want in zip(views, with_codes, strict=True):
        assert view(events).equals(want)
