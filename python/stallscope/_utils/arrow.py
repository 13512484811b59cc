"""NumPy arrays and string tables into Polars through the Arrow C data interface
(csrc/arrow/column_export.h): ``pl.Series(ndarray)`` imports ``numpy.ma`` on first use (about
20 ms in a fresh process) and checks every array for a mask; these do neither. The hot paths
(the Kineto import, the analysis views) build their frames with these."""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope import _core


def _direct() -> tuple[Any, Any] | None:
    """Polars' native Series and DataFrame types (PySeries, PyDataFrame), when this Polars has
    the constructors `column` and `frame_of` use; None otherwise (they then call the public
    constructors)."""
    for where in ("polars._plr", "polars.polars"):
        try:
            mod = importlib.import_module(where)
        except ImportError:
            continue
        ps, pdf = getattr(mod, "PySeries", None), getattr(mod, "PyDataFrame", None)
        if (
            hasattr(ps, "from_arrow_c_array")
            and pdf is not None
            and hasattr(pl.Series, "_from_pyseries")
            and hasattr(pl.DataFrame, "_from_pydf")
        ):
            return ps, pdf
    return None


_DIRECT: Final = _direct()


def column(col: Any) -> pl.Series:
    """pl.Series(col) for an object with `__arrow_c_array__` (the extension's ArrowColumn),
    straight through Polars' Arrow import. The public constructor first tests the object
    against a dozen other input types (sequence, NumPy, torch, pandas, generator ABCs, ...):
    4 µs a call, 0.3-2 ms for the first in a process, against 2 µs and 0.1 ms."""
    if _DIRECT is None:
        return pl.Series(col)
    return pl.Series._from_pyseries(_DIRECT[0].from_arrow_c_array(col))


def frame_of(columns: Sequence[pl.Series]) -> pl.DataFrame:
    """pl.DataFrame(columns) for Series, without the public constructor's dispatch on its
    input (~20 µs a frame, against ~3). Polars checks the heights and names either way
    (ShapeError, DuplicateError)."""
    if _DIRECT is None:
        return pl.DataFrame(columns)
    return pl.DataFrame._from_pydf(_DIRECT[1]([c._s for c in columns]))


def series(
    values: np.ndarray[Any, Any],
    name: str = "",
    dtype: pl.DataType | type[pl.DataType] | None = None,
) -> pl.Series:
    """A copy of a 1-D NumPy array (bool, int, uint, float) as a Series, cast to `dtype` if
    given. NaN stays NaN (fill_nan(None) for nulls)."""
    a = np.ascontiguousarray(values)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    s = column(_core.arrow_numeric(a, name))
    return s if dtype is None or s.dtype == dtype else s.cast(dtype)


def strings(table: Sequence[str], codes: np.ndarray[Any, Any], name: str = "") -> pl.Series:
    """table[code] per code as a String Series; null where the code is negative. int32 codes
    are read in place, others as int64 (the extension converts them)."""
    return column(_core.arrow_strings(list(table), np.asarray(codes), name))


def enum(
    codes: np.ndarray[Any, Any], categories: Sequence[str], dtype: pl.Enum, name: str = ""
) -> pl.Series:
    """uint8 `codes` into `categories` as a Series of `dtype` (pl.Enum(categories)), imported
    as an Arrow dictionary column that Polars reads back as that Enum: no gather, whose first
    use costs a fresh process 3-5 ms. The codes are shared when they are the extension's
    read-only storage. ValueError for a code past the categories. A Polars that reads the
    column otherwise (not as this Enum) gets the gather instead."""
    s = column(_core.arrow_enum(np.ascontiguousarray(codes), list(categories), name))
    if s.dtype == dtype:
        return s
    return pl.Series(name, categories, dtype=dtype).gather(series(codes, dtype=pl.UInt32))


def enum_codes(s: pl.Series, null_code: int = 0) -> np.ndarray[Any, Any]:
    """The physical codes of an Enum Series (each row's position in its categories) as NumPy:
    uint8 up to 256 categories, else uint32; `null_code` where null. Read through the Arrow C
    stream, not `to_physical()`: that is a Polars query, and a process's first one costs ~3 ms
    (the analysis of a small trace can then run without any). TypeError for other dtypes."""
    dtype = s.dtype
    if not isinstance(dtype, pl.Enum):
        raise TypeError(f"enum_codes: expected an Enum Series, got {dtype}")
    out: np.ndarray[Any, Any] = _core.dictionary_codes(s, len(dtype.categories), null_code)
    return out


def int_values(s: pl.Series, dtype: type[np.integer[Any]], null: int) -> np.ndarray[Any, Any]:
    """An integer Series as a NumPy array of `dtype` (no copy when it is one already and has
    no nulls), its nulls read as `null` (the fill only where there are any)."""
    if s.null_count():
        s = s.fill_null(null)
    out: np.ndarray[Any, Any] = s.to_numpy().astype(dtype, copy=False)
    return out


def frame(columns: Mapping[str, np.ndarray[Any, Any] | pl.Series]) -> pl.DataFrame:
    """A DataFrame from NumPy arrays and Series (arrays converted with `series`)."""
    return frame_of(
        [v.alias(k) if isinstance(v, pl.Series) else series(v, k) for k, v in columns.items()]
    )


@dataclass
class _Codes:
    """A string column made from a table by code, and what `known_codes` derives from it."""

    column: pl.Series  # held: while it lives, no other column has its buffers' addresses
    table: list[str]
    codes: np.ndarray[Any, Any]  # int32 or int64, into table
    distinct: tuple[np.ndarray[Any, Any], list[str]] | None = None


# By `_core.column_key`: the codes of string columns made by `strings` (the Kineto import's
# names), each entry dropped once its frame is gone.
_KNOWN: dict[tuple[str | int, ...], _Codes] = {}


def remember_codes(
    frame: pl.DataFrame, name: str, table: Sequence[str], codes: np.ndarray[Any, Any]
) -> None:
    """Note that `frame`'s column `name` is `strings(table, codes)`, so that `known_codes` can
    give its codes without reading a row. Kept while `frame` lives."""
    column = frame.get_column(name)
    key = _core.column_key(column)
    if key is None:
        return
    entry = _Codes(column, list(table), codes)
    _KNOWN[key] = entry
    weakref.finalize(frame, _forget, key, entry)


def _forget(key: tuple[str | int, ...], entry: _Codes) -> None:
    if _KNOWN.get(key) is entry:
        del _KNOWN[key]


def known_codes(s: pl.Series) -> tuple[np.ndarray[Any, Any], list[str]] | None:
    """What `_core.string_codes(s)` gives as (codes, values), for a column `remember_codes`
    was told of (its own or one sharing its buffers), in O(distinct strings); None for any
    other column. The codes are dense and equal exactly for equal strings, as there, but not
    numbered in order of first appearance."""
    if s.dtype != pl.String:
        return None
    key = _core.column_key(s)
    entry = _KNOWN.get(key) if key is not None else None
    if entry is None:
        return None
    if entry.distinct is None:
        codes = entry.codes
        if codes.size and int(codes.min()) < 0:  # a null row: string_codes reads it as ""
            return None
        first: dict[str, int] = {}
        remap = np.array([first.setdefault(v, len(first)) for v in entry.table], np.uint32)
        if len(first) == len(entry.table):
            out = codes.view(np.uint32) if codes.dtype == np.int32 else codes.astype(np.uint32)
        else:  # a value twice in the table: one code for both
            out = remap[codes]
        entry.distinct = (out, list(first))
    return entry.distinct
