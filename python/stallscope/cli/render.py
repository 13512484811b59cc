"""Terminal rendering of frames (rich). The only place tables are drawn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

MS = 1e6  # ns per ms


def label(category: str) -> str:
    """A category's header: words that may wrap ("sync wait", "data fetch", "host wait")."""
    return category.replace("_", " ")


def _cell(v: Any, digits: int | None) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float) and digits is not None:
        return f"{v:,.{digits}f}"  # one number of decimals per column: the points line up
    return str(v)


def print_frame(
    df: pl.DataFrame,
    title: str | None = None,
    max_rows: int = 200,
    digits: int | Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
) -> None:
    """Print `df` as a table. Floats get `digits` decimals (one count for every float column,
    or per column name; None: as Python prints them). `labels` renames headers (they wrap
    between words). Neither a number nor a header word is cut: each column is at least as
    wide as its widest cell and its header's longest word."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    def places(col: str) -> int | None:
        return digits.get(col) if isinstance(digits, Mapping) else digits

    shown = df.head(max_rows)
    cells = [[_cell(v, places(c)) for v in shown[c].to_list()] for c in shown.columns]
    # No vertical rules and one space between columns: the width goes to the numbers.
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        header_style="bold",
        collapse_padding=True,
        pad_edge=False,
    )
    for (name, dtype), col in zip(df.schema.items(), cells, strict=True):
        label = (labels or {}).get(name, name)
        table.add_column(
            label,
            justify="right" if dtype.is_numeric() else "left",
            overflow="fold",
            width=max(max((len(s) for s in col), default=1), *map(len, label.split())),
        )
    for row in zip(*cells, strict=True):
        table.add_row(*row)
    console = Console()
    need = sum(c.width or 0 for c in table.columns) + 2 * len(table.columns) + 1
    if need > console.width:  # wider than the terminal: let the lines wrap, never crop a column
        console = Console(width=need)
    console.print(table)
    console.print()  # a blank line between tables
    if df.height > max_rows:
        console.print(f"... {df.height - max_rows} more rows")
