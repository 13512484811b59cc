"""The one definition of the stall categories' meanings: it covers every category, and the docs
and the CLI show it word for word."""

from __future__ import annotations

from pathlib import Path

from stallscope.analysis import STALL_CATEGORIES, STALL_MEANINGS, stall_legend
from stallscope.cli.report import legend_lines

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "stall-categories.md"


def test_every_category_has_one_meaning_in_priority_order() -> None:
    assert tuple(STALL_MEANINGS) == STALL_CATEGORIES
    legend = stall_legend()
    assert legend.columns == ["category", "meaning"]
    assert legend["category"].to_list() == list(STALL_CATEGORIES)
    assert all(m and "\n" not in m for m in STALL_MEANINGS.values())


def test_the_docs_give_the_same_meanings() -> None:
    for doc in (DOC, REPO / "README.md"):
        text = doc.read_text()
        for category, meaning in STALL_MEANINGS.items():
            assert f"| {category.replace('_', ' ')} | {meaning} |" in text, (doc.name, category)


def test_the_cli_legend_gives_them_whole() -> None:
    lines = legend_lines(["sync_wait", "host"])
    assert len(lines) == 2
    joined = [" ".join(line.split()) for line in lines]
    assert joined[0] == f"sync wait {STALL_MEANINGS['sync_wait']}"
    assert joined[1] == f"host {STALL_MEANINGS['host']}"
