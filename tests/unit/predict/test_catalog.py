"""Source objects of the sourced catalogs: the optional ``unverified`` mark."""

from __future__ import annotations

import pytest

from stallscope.predict import CatalogError
from stallscope.predict._catalog import parse_source

URL = "https://example.com/spec.pdf"


def test_a_source_is_verified_unless_marked() -> None:
    src = parse_source({"url": URL, "date": "2024-05"}, "device 'X'")
    assert src.unverified is False
    marked = parse_source(
        {"url": URL, "date": "2024-05", "where": "Table 1, as quoted", "unverified": True}, "x"
    )
    assert marked.unverified is True and marked.where == "Table 1, as quoted"


def test_a_bad_unverified_mark_is_refused() -> None:
    with pytest.raises(CatalogError, match="'unverified' must be true or false"):
        parse_source({"url": URL, "date": "2024", "where": "w", "unverified": "yes"}, "x")
    with pytest.raises(CatalogError, match="needs a 'where' saying what the figure rests on"):
        parse_source({"url": URL, "date": "2024", "unverified": True}, "link 'y'")
