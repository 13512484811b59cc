"""Turning the text cells of a table file into typed columns, collecting every problem with the
file, row and column it is at, and raising them together as one CatalogError."""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable

from stallscope.exceptions import CatalogError
from stallscope.recommend._table_file import TextTable

_SHOWN = 12  # problems listed in one error; the rest are counted


class Problems:
    """The problems found in one table, raised together by `check`."""

    def __init__(self, table: TextTable, what: str) -> None:
        self.table = table
        self.what = what
        self.lines: list[str] = []

    def add(self, row: int, column: str, problem: str) -> None:
        self.lines.append(f"{self.table.where(row, column)}: {problem}")

    def check(self) -> None:
        """Raise the problems found so far, if any."""
        if not self.lines:
            return
        shown = self.lines[:_SHOWN]
        more = len(self.lines) - len(shown)
        tail = f"\n  ... and {more} more" if more else ""
        raise CatalogError(
            f"{self.table.path}: {len(self.lines)} problem(s) in this {self.what}:\n  "
            + "\n  ".join(shown)
            + tail
        )


def check_columns(
    table: TextTable, required: Iterable[str], optional: Iterable[str], what: str
) -> None:
    """A CatalogError naming the file and the column when a required column is missing or a
    column is not one the table may have."""
    required = tuple(required)
    allowed = required + tuple(optional)
    missing = [c for c in required if c not in table.columns]
    unknown = [c for c in table.columns if c not in allowed]
    if not missing and not unknown:
        return
    parts = []
    if missing:
        parts.append("missing column(s) " + ", ".join(missing))
    if unknown:
        parts.append("unknown column(s) " + ", ".join(unknown))
    raise CatalogError(
        f"{table.path}: {'; '.join(parts)}; a {what} has the columns {', '.join(allowed)}"
        + ("" if not tuple(optional) else f" (optional: {', '.join(optional)})")
    )


def text_column(p: Problems, column: str) -> list[str]:
    """A column of non-empty text."""
    out: list[str] = []
    for i, v in enumerate(p.table.cells[column]):
        if v is None:
            p.add(i, column, "empty; expected a value")
        out.append(v or "")
    return out


def number_column(
    p: Problems,
    column: str,
    *,
    whole: bool = False,
    positive: bool = True,
    nullable: bool = False,
    low: float | None = None,
    high: float | None = None,
    empty_means: str = "",
) -> list[float | None]:
    """A column of numbers: > 0 when `positive` (>= 0 otherwise), whole numbers when `whole`,
    within [low, high] when given; empty cells are None when `nullable` (`empty_means` says what
    an empty cell stands for, in the message of a bad one)."""
    kind = "a whole number" if whole else "a number"
    out: list[float | None] = []
    for i, v in enumerate(p.table.cells[column]):
        if v is None:
            if not nullable:
                p.add(i, column, f"empty; expected {kind}")
            out.append(None)
            continue
        try:
            x = float(v)
        except ValueError:
            hint = f" (leave the cell empty {empty_means})" if nullable and empty_means else ""
            p.add(i, column, f"{v!r} is not a number; expected {kind}{hint}")
            out.append(None)
            continue
        if math.isnan(x) or math.isinf(x):
            p.add(i, column, f"{v!r} is not a finite number; expected {kind}")
        elif whole and x != int(x):
            p.add(i, column, f"{v!r} is not a whole number")
        elif x < 0:
            p.add(i, column, f"{v!r} is negative; expected {kind} > 0")
        elif positive and x == 0:
            p.add(i, column, f"{v!r} is zero; expected {kind} > 0")
        elif (low is not None and x < low) or (high is not None and x > high):
            lo = "-inf" if low is None else f"{low:g}"
            hi = "inf" if high is None else f"{high:g}"
            p.add(i, column, f"{v!r} is outside {lo}..{hi}")
        out.append(int(x) if whole and x == int(x) else x)
    return out


def date_column(p: Problems, column: str) -> list[datetime.date | None]:
    """A column of ISO dates (YYYY-MM-DD)."""
    out: list[datetime.date | None] = []
    for i, v in enumerate(p.table.cells[column]):
        if v is None:
            p.add(i, column, "empty; expected a date (YYYY-MM-DD)")
            out.append(None)
            continue
        try:
            d: datetime.date | None = datetime.date.fromisoformat(v)
        except ValueError:
            p.add(i, column, f"{v!r} is not a date; expected YYYY-MM-DD")
            d = None
        out.append(d)
    return out
