"""Terminal rendering of frames (rich). The only place tables are drawn."""

from __future__ import annotations

import polars as pl


def print_frame(df: pl.DataFrame, title: str | None = None, max_rows: int = 200) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False, header_style="bold")
    for name, dtype in df.schema.items():
        table.add_column(name, justify="right" if dtype.is_numeric() else "left")
    for row in df.head(max_rows).iter_rows():
        table.add_row(
            *("" if v is None else f"{v:,}" if isinstance(v, int) else str(v) for v in row)
        )
    console = Console()
    console.print(table)
    if df.height > max_rows:
        console.print(f"... {df.height - max_rows} more rows")
