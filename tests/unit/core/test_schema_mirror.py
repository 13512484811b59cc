"""The Python schema and the C++ record agree: kinds, categories, layout."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope import _core
from stallscope._schema import (
    CATEGORIES,
    COLUMNS,
    KINDS,
    SCHEMA,
    conform,
    detail_value,
    format_detail,
    parse_detail,
)


def test_kind_and_category_names_match_native() -> None:
    assert list(KINDS) == _core.KIND_NAMES
    assert list(CATEGORIES) == _core.CATEGORY_NAMES


def test_record_is_48_bytes_with_documented_layout() -> None:
    assert _core.RECORD_SIZE == 48
    off = _core.RECORD_OFFSETS
    assert [off[f] for f in ("start_ns", "end_ns", "correlation", "bytes")] == [0, 8, 16, 24]
    assert [off[f] for f in ("name_id", "detail_id", "lane", "device", "kind", "category")] == [
        32,
        36,
        40,
        44,
        46,
        47,
    ]


def test_conform_fills_defaults_and_orders_columns() -> None:
    df = pl.DataFrame({"name": ["a"], "kind": ["kernel"], "start_ns": [5], "end_ns": [9]})
    out = conform(df).collect()
    assert tuple(out.columns) == COLUMNS
    assert out.schema == pl.Schema(SCHEMA)
    row = out.row(0, named=True)
    assert row["device"] == -1 and row["category"] == "host" and row["value"] is None


def test_conform_names_missing_required_column() -> None:
    with pytest.raises(
        ValueError, match=r"lacks the event column\(s\) \['kind', 'start_ns', 'end_ns'\]"
    ):
        conform(pl.DataFrame({"name": ["a"]}))


def test_detail_round_trip() -> None:
    d = format_detail({"group": "pg0", "nnodes": 2})
    df = pl.DataFrame({"detail": [d, None]})
    got = df.select(
        parse_detail(pl.col("detail"), "nnodes", pl.Int32()).alias("n"),
        parse_detail(pl.col("detail"), "group").alias("g"),
    )
    assert got["n"].to_list() == [2, None]
    assert got["g"].to_list() == ["pg0", None]


# Detail strings built from pieces that make the edge cases likely: the key at the start, after
# a ';', inside another key ("xgroup="), twice, empty values, values with '='.
_pieces = st.sampled_from(["group=", "xgroup=", ";", "=", "a", "pg0", "group", ";group=b", "\n"])


@settings(max_examples=300, deadline=None)
@given(st.none() | st.lists(_pieces, max_size=8).map("".join))
def test_detail_value_equals_parse_detail(detail: str | None) -> None:
    """One string's value (detail_value, Python) is the column expression's (parse_detail)."""
    want = pl.DataFrame({"d": [detail]}, schema={"d": pl.String}).select(
        parse_detail(pl.col("d"), "group")
    )
    assert detail_value(detail, "group") == want.item()
