"""Reading a user's table file (CSV, Parquet or JSON) as text cells, so that each value can be
checked, and reported, by its row and column."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stallscope.exceptions import CatalogError

FORMATS = "CSV (.csv), Parquet (.parquet, .pq) or JSON (.json: a list of objects, one per row)"


@dataclass(frozen=True)
class TextTable:
    """The cells of a table file as text (None where empty), column by column. Rows are counted
    from 1, after the header."""

    path: Path
    columns: tuple[str, ...]
    cells: dict[str, list[str | None]]

    @property
    def height(self) -> int:
        return len(next(iter(self.cells.values()))) if self.cells else 0

    def where(self, row: int, column: str) -> str:
        """ "FILE, row N, column C": where a value is, for an error message (`row` from 0)."""
        return f"{self.path}, row {row + 1}, column {column}"


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()[:10]
    s = str(v).strip()
    return s or None


def read_text_table(path: Path, what: str) -> TextTable:
    """The cells of `path` (`what` it is, e.g. "instance catalog", names it in errors)."""
    import polars as pl

    if not path.is_file():
        raise CatalogError(f"{path}: no such {what} file; pass an existing {FORMATS} file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            df = pl.read_csv(path, infer_schema=False, truncate_ragged_lines=False)
        elif suffix in (".parquet", ".pq"):
            df = pl.read_parquet(path)
        elif suffix == ".json":
            return _json_table(path, what)
        else:
            raise CatalogError(
                f"{path}: unknown {what} format {suffix or '(no suffix)'}; use {FORMATS}"
            )
    except (pl.exceptions.PolarsError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CatalogError(f"{path}: not a readable {what} ({first}); use {FORMATS}") from None
    cells = {c: [_text(v) for v in df[c].to_list()] for c in df.columns}
    return TextTable(path, tuple(df.columns), cells)


def _json_table(path: Path, what: str) -> TextTable:
    import orjson

    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise CatalogError(
            f"{path}: not valid JSON ({e}); a {what} in JSON is a list of objects, one per row"
        ) from None
    if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
        raise CatalogError(
            f"{path}: a {what} in JSON is a list of objects, one per row "
            f'([{{"cloud": "aws", ...}}, ...]); this file holds a {type(doc).__name__}'
        )
    columns: list[str] = []
    for r in doc:
        columns.extend(k for k in r if k not in columns)
    cells = {c: [_text(r.get(c)) for r in doc] for c in columns}
    return TextTable(path, tuple(columns), cells)
