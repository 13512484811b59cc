"""Lists of numbers as ranges, for messages."""

from __future__ import annotations

from stallscope._utils.text import ranges, ranks_text


def test_ranges() -> None:
    assert ranges([]) == ""
    assert ranges([3]) == "3"
    assert ranges([5, 0, 1, 2, 7, 8, 2]) == "0-2, 5, 7-8"
    assert ranks_text([4]) == "rank 4"
    assert ranks_text(range(1, 16)) == "ranks 1-15"
