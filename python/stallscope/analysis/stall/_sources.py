"""The stall table's inputs: the columns it reads, and the priority label of every event
(the rules of _table's docstring), by one table lookup on the kind / category codes.

Frames below PARALLEL_ROWS take their whole-column passes in NumPy (Polars' per-query cost,
0.3-4 ms even on 10 k events, would dominate); larger ones in Polars on all threads. Only the
few rows that need it (steps, the non-compute intervals, the comm events) become arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope._schema import CATEGORIES, GPU_KINDS, KINDS, SCHEMA, conform, kind_mask
from stallscope._utils import arrow as _arrow

Array = np.ndarray[Any, Any]

NEEDED: Final = ("rank", "kind", "category", "start_ns", "end_ns", "correlation", "lane")
"""The event columns the stall table reads (names and details only for comm events)."""

COMM_KINDS: Final = ("collective", "p2p", "bucket")
_NULL_CAT: Final = len(CATEGORIES)  # category code standing for a null category: claims nothing
_CODES: Final = len(CATEGORIES) + 1  # category codes per kind in the label table


@dataclass
class Rows:
    """The NEEDED columns a small frame's passes read, as NumPy (no nulls: rows with a null
    rank, kind, start or end are gone): kind and category codes (a null category as
    _NULL_CAT), rank, start_ns, end_ns."""

    kind: Array
    category: Array
    rank: Array
    start: Array
    end: Array


@dataclass
class Columns:
    """The events' columns the table reads (rows with a null rank, kind, start or end dropped:
    they can lie in no step): ``frame`` holds the NEEDED columns (small frames: the events
    themselves, which hold them); ``gpu``: whether any row is GPU activity; ``comm``: the
    collective / p2p / bucket rows with name, detail and bytes, None when there are none;
    ``rows``: frames below PARALLEL_ROWS as NumPy (`Rows`), None for larger ones, whose
    whole-column passes stay in Polars (all threads; the 10 M-event runs need them). Only
    the few rows that need it become NumPy there (`take`)."""

    frame: pl.DataFrame
    gpu: bool
    comm: pl.DataFrame | None
    rows: Rows | None = None

    def comm_kind(self) -> Array:
        """The kind codes of `comm`'s rows (none: empty)."""
        if self.comm is None:
            return np.zeros(0, np.uint8)
        return _arrow.enum_codes(self.comm["kind"])

    def take(self, rows: Array) -> tuple[Array, Array, Array]:
        """rank, start_ns, end_ns of the rows (indices)."""
        if self.rows is not None:
            return self.rows.rank[rows], self.rows.start[rows], self.rows.end[rows]
        df = self.frame[_arrow.series(rows)]
        return df["rank"].to_numpy(), df["start_ns"].to_numpy(), df["end_ns"].to_numpy()


def columns(events: pl.DataFrame | pl.LazyFrame) -> Columns:
    """The table's columns of `events` (stallscope.load / scan / import_kineto's frame, or any
    frame `conform` accepts). A lazy source is read once: the NEEDED columns, and names,
    details and sizes of the comm events only (their bytes are not read: collectives get 0)."""
    comm_cols = ("name", "detail", "bytes")
    if isinstance(events, pl.LazyFrame):
        is_comm = pl.col("kind").is_in(COMM_KINDS)
        lf = conform(events)
        df = lf.select(
            *NEEDED,
            *(pl.when(is_comm).then(pl.col(c)).alias(c) for c in ("name", "detail")),
            bytes=pl.lit(0, pl.Int64),
        ).collect()
    else:
        have = events.schema
        ok = all(c in have and have[c] == SCHEMA[c] for c in (*NEEDED, *comm_cols))
        df = events if ok else conform(events).collect()
    required = ("rank", "kind", "start_ns", "end_ns")
    if any(df[c].null_count() for c in required):
        df = df.drop_nulls(required)
    if df.height < PARALLEL_ROWS:  # NumPy: no per-query cost
        # Enum codes through Arrow, not to_physical(): a small trace's whole analysis then runs
        # without a Polars query (a process's first one costs ~3 ms).
        kind = _arrow.enum_codes(df["kind"])
        rows = Rows(
            kind=kind,
            category=_arrow.enum_codes(df["category"], _NULL_CAT),
            rank=df["rank"].to_numpy(),
            start=df["start_ns"].to_numpy(),
            end=df["end_ns"].to_numpy(),
        )
        # Rows per kind (one pass): the comm mask only where there are comm rows.
        per_kind = np.bincount(kind, minlength=_COMM_KIND.size)
        comm = None
        if per_kind[_COMM_KIND].any():  # the rows of each column (no query), then a frame
            comm = rows_of(df, _COMM_KIND[kind], (*NEEDED, *comm_cols))
        return Columns(frame=df, gpu=bool(per_kind[_GPU_KIND].any()), comm=comm, rows=rows)
    gpu, comm = pl.collect_all(
        [
            df.lazy().select(pl.col("kind").is_in(GPU_KINDS).any()),
            df.lazy().filter(pl.col("kind").is_in(COMM_KINDS)).select(*NEEDED, *comm_cols),
        ]
    )
    return Columns(
        frame=df.select(NEEDED), gpu=bool(gpu.item()), comm=comm if comm.height else None
    )


def rows_of(df: pl.DataFrame, keep: Array, names: tuple[str, ...] | None = None) -> pl.DataFrame:
    """The rows of `df` where the bool array `keep` holds, columns `names` (all by default):
    each column filtered on its own. A frame's gather or filter runs on Polars' thread pool,
    and the first in a process starts it (~0.9 ms where a small trace's comm rows took 0.3 ms
    this way)."""
    mask = _arrow.series(keep)
    return _arrow.frame_of([df.get_column(c).filter(mask) for c in names or df.columns])


PARALLEL_ROWS: Final = 1_000_000
"""Frames this large take their whole-column passes in Polars (all threads); smaller ones in
NumPy, where Polars' per-query cost (0.3-4 ms, more on a query's first use in a process)
would dominate. Both run the same tables and formulas; the tests run both."""
_COMM_KIND: Final = kind_mask(COMM_KINDS)
_GPU_KIND: Final = kind_mask(GPU_KINDS)


ATTRIBUTED: Final[tuple[str, ...]] = (
    "compute",
    "memcpy",
    "sync_wait",
    "network",
    "interconnect",
    "data_fetch",
    "data_prep",
    "data",
)
"""Categories claimed by intervals, in priority order (position = priority, 0 highest)."""

P: Final[dict[str, int]] = {c: i for i, c in enumerate(ATTRIBUTED)}
COMM_TRANSFER: Final = 100  # (Int8) placeholder label: network or interconnect by the rank's nodes
NO_LABEL: Final = -1
_DATA_CATS: Final = ("data", "data_fetch", "data_prep")


def label_of(kind: str, category: str | None, gpu: bool) -> int:
    """The priority label of a non-collective event (NO_LABEL: claims no time); the rules of
    _table's docstring. A null category claims nothing."""
    if category is None:
        return NO_LABEL
    region = kind == "region"
    if kind == "data_wait" or (region and category in _DATA_CATS):
        return P[category] if category in _DATA_CATS else P["data"]
    if gpu:
        if kind == "kernel":
            return {"comm": COMM_TRANSFER, "memcpy": P["memcpy"], "sync": NO_LABEL}.get(
                category, P["compute"]
            )
        return P["memcpy"] if kind in ("memcpy", "memset") else NO_LABEL
    if region and category in ("compute", "memcpy"):
        return P[category]
    if kind == "bucket" or (region and category == "comm"):
        return COMM_TRANSFER
    return NO_LABEL


_TABLES: Final = {
    gpu: np.array([label_of(k, c, gpu) for k in KINDS for c in (*CATEGORIES, None)], dtype=np.int32)
    for gpu in (False, True)
}
"""Label by ``kind_code * _CODES + category_code`` (the last category code is null's)."""


def label_expr(gpu: bool) -> pl.Expr:
    """Every row's label (NO_LABEL, a priority, or COMM_TRANSFER; Int8), by table lookup on
    the Enums' codes. Collective and p2p events get theirs from the matching
    (_table._collective_intervals)."""
    code = pl.col("kind").to_physical().cast(pl.Int32) * _CODES + pl.col(
        "category"
    ).to_physical().cast(pl.Int32).fill_null(_NULL_CAT)
    return pl.lit(pl.Series(_TABLES[gpu].tolist(), dtype=pl.Int8)).gather(code)


def labels(rows: Rows, gpu: bool) -> Array:
    """`label_expr` in NumPy (int32), for frames below PARALLEL_ROWS."""
    out: Array = _TABLES[gpu][rows.kind.astype(np.intp) * _CODES + rows.category]
    return out
