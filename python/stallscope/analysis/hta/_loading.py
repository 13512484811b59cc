"""HTA's view of a trace: the rows and times HolisticTraceAnalysis 0.5.0 works on, rebuilt from an
events frame (docs/hta-compatibility.md section 1), so the HTA-identical views give its numbers.

- Rows: every imported trace row (HTA keeps rows with ``dur`` and ``cat``, except cat Trace);
  stallscope's own additions (the trace mark, collective / p2p events) are left out.
- Times in trace units (µs) as HTA has them: for traces written with float (ns-resolution)
  timestamps ``ts = ceil(ts)``, ``end = floor(ts + dur)`` in float64 (the exact floats are
  rebuilt from integer ns: both are the correctly rounded value of the same decimal);
  ``ts -= min(ts)`` over all ranks.
- ``stream``: the stream of GPU rows, -1 for the rest; ``correlation``: -1 when none.
- GPU row = ``stream >= 0 and correlation >= 0`` or name Event Sync / Context Sync.
- Last-step filter (HTA's default): when at least 2 distinct ProfilerStep names exist, keep CPU
  rows with ``ts`` before the last ProfilerStep's start and GPU rows whose correlation matches
  a kept CPU row (one copy per match, as HTA's inner merge).

Native captures (no trace mark) are treated as a ns-resolution Kineto export of the same events.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import InitVar, dataclass, field
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope._schema import GPU_KINDS, KIND, KIND_ID, KINDS, TRACE_MARK, kind_mask
from stallscope._schema._classify import hta_kernel_type_of
from stallscope._utils import arrow as _arrow
from stallscope._utils.sorted import distinct, segment_starts

NOT_HTA_KINDS = ("mark", "collective", "p2p", "counter", "clock_sync", "bucket")
SYNC_NAMES = ("Event Sync", "Context Sync")


_Fact = tuple[int, int, bool, int | None]  # rank, base_ns, ts_float, row0_ns


def _trace_facts(marks: Iterable[tuple[int, str | None, str | None]]) -> dict[int, _Fact]:
    """rank -> (rank, base_ns, ts_float, row0_ns) from the importer's trace marks (`marks`:
    (rank, name, detail) of the rows of kind mark, in row order; the first trace mark of a rank
    counts). Native runs have none: base 0, float timestamps."""
    out: dict[int, _Fact] = {}
    for rank, name, detail in marks:
        if name != TRACE_MARK or rank in out:
            continue
        d: dict[str, str] = {}
        for pair in (detail or "").split(";"):
            k, eq, v = pair.partition("=")
            if eq:
                d.setdefault(k, v)
        row0 = d.get("row0_ns", "")
        out[rank] = (
            rank,
            int(d.get("base_ns") or 0),
            d.get("ts_float") == "1",
            int(row0) if row0.lstrip("-").isdigit() else None,
        )
    return out


@dataclass(eq=False)
class HtaRows:
    """The rows HTA analyses, as NumPy arrays in HTA's row order (one entry per row):

    - ``row``: the row's position in the events frame (repeated where HTA's merge repeats it);
    - ``rank`` (int32), ``kind`` (KINDS code), ``name`` (code into ``names``, the distinct names;
      a null name reads as "");
    - ``stream`` (int64, -1 for rows of no GPU kind), ``correlation`` (int64, -1 when none),
      ``is_gpu``;
    - ``ts``, ``end`` (HTA's µs, float64), ``runtime`` (the aligned ts of the CPU row with the same
      correlation, NaN when none: GPU rows only);
    - ``kernel_type`` (computed from ``names`` unless given): HTA's, a position in KERNEL_TYPES,
      on rows with a stream (-1 elsewhere: no view reads it there).

    ``frame()`` gives them as the frame `hta_rows` returns. With ``gpu_only`` the arrays hold only
    the rows with a stream, in the same order (what the kernel views read); there is no frame
    then."""

    row: np.ndarray[Any, Any]
    rank: np.ndarray[Any, Any]
    kind: np.ndarray[Any, Any]
    name: np.ndarray[Any, Any]
    names: list[str]
    stream: np.ndarray[Any, Any]
    correlation: np.ndarray[Any, Any]
    is_gpu: np.ndarray[Any, Any]
    ts: np.ndarray[Any, Any]
    end: np.ndarray[Any, Any]
    runtime: np.ndarray[Any, Any]
    name_column: pl.Series  # the events' name column (`row` indexes it)
    kernel_type: np.ndarray[Any, Any] = field(init=False)
    _frame: pl.DataFrame | None = field(default=None, repr=False)
    gpu_only: bool = False
    _gpu: HtaRows | None = field(default=None, repr=False)
    kernel_types: InitVar[np.ndarray[Any, Any] | None] = None  # given: kernel_type, not computed

    def __post_init__(self, kernel_types: np.ndarray[Any, Any] | None) -> None:
        if kernel_types is not None:  # a subset's, taken from the rows it came from
            self.kernel_type = kernel_types
            return
        # HTA's kernel type of each row with a stream, classified once per distinct name there.
        gpu = self.stream != -1
        type_of_name = np.full(len(self.names), -1, np.int8)
        for code in distinct(self.name[gpu]).tolist():
            type_of_name[code] = KERNEL_TYPES.index(hta_kernel_type_of(self.names[code]))
        self.kernel_type = np.where(gpu, type_of_name[self.name], np.int8(-1))

    def named(self, names: tuple[str, ...]) -> np.ndarray[Any, Any]:
        """Whether each row's name is one of `names` (tested once per distinct name)."""
        of_name = np.array([n in names for n in self.names], dtype=bool)
        mask: np.ndarray[Any, Any] = of_name[self.name]
        return mask

    def gpu(self) -> np.ndarray[Any, Any]:
        """Positions of the rows with a stream (HTA's GPU kernel rows)."""
        return np.flatnonzero(self.stream != -1)

    def gpu_rows(self) -> HtaRows:
        """The rows with a stream, in their order (``gpu_only``); made once."""
        if self.gpu_only:
            return self
        if self._gpu is None:
            g = self.gpu()
            self._gpu = HtaRows(
                self.row[g],
                self.rank[g],
                self.kind[g],
                self.name[g],
                self.names,
                self.stream[g],
                self.correlation[g],
                self.is_gpu[g],
                self.ts[g],
                self.end[g],
                self.runtime[g],
                self.name_column,
                gpu_only=True,
                kernel_types=self.kernel_type[g],
            )
        return self._gpu

    def frame(self) -> pl.DataFrame:
        """rank, kind, name, ts, dur, end (µs, float64), stream, correlation, is_gpu,
        kernel_type (KERNEL_TYPE; null off GPU rows), ts_runtime (null when none); built once."""
        if self.gpu_only:
            raise ValueError("these HTA rows hold the GPU rows only: use hta_arrays(events)")
        if self._frame is None:
            gpu = self.stream != -1
            kt = _arrow.series(np.where(gpu, self.kernel_type, 0), dtype=pl.UInt32)
            self._frame = pl.DataFrame(
                [
                    _arrow.series(self.rank, "rank", pl.Int32),
                    _KIND_NAMES.gather(_arrow.series(self.kind, dtype=pl.UInt32)).alias("kind"),
                    self.name_column.gather(_arrow.series(self.row)).alias("name"),
                    _arrow.series(self.stream, "stream", pl.Int64),
                    _arrow.series(self.correlation, "correlation", pl.Int64),
                    _arrow.series(self.is_gpu, "is_gpu"),
                    _arrow.series(self.ts, "ts", pl.Float64),
                    _arrow.series(self.end, "end", pl.Float64),
                    _arrow.series(self.end - self.ts, "dur", pl.Float64),
                    _arrow.series(self.runtime, "ts_runtime", pl.Float64).fill_nan(None),
                    _KERNEL_TYPE_NAMES.gather(kt)
                    .alias("kernel_type")
                    .zip_with(_arrow.series(gpu), pl.Series([None], dtype=KERNEL_TYPE)),
                ]
            )
        return self._frame


def us_to_ns(us: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """HTA's µs as int64 ns: x1000, rounded half to even."""
    return np.round(us * 1000.0).astype(np.int64)


def hta_rows(
    events: pl.DataFrame | pl.LazyFrame, *, include_last_profiler_step: bool = False
) -> pl.DataFrame:
    """The rows HTA analyses as a frame (`HtaRows.frame`)."""
    return hta_arrays(events, include_last_profiler_step=include_last_profiler_step).frame()


def hta_arrays(
    events: pl.DataFrame | pl.LazyFrame,
    *,
    include_last_profiler_step: bool = False,
    gpu_only: bool = False,
) -> HtaRows:
    """The rows HTA analyses (`HtaRows`); with `gpu_only`, only those with a stream (HTA's
    kernel views read no others: on the V100 trace 18 k of 99 k rows). Memoised for the last
    few DataFrames seen (by identity, while they live), so the views called one after another
    on one events frame share this work; a GPU-only request takes the GPU rows of a whole
    result already made."""
    whole = _cached(events, include_last_profiler_step, False)
    if whole is not None:
        return whole.gpu_rows() if gpu_only else whole
    out = _cached(events, include_last_profiler_step, True) if gpu_only else None
    if out is not None:
        return out
    out = _hta_rows(events, include_last_profiler_step, gpu_only)
    if isinstance(events, pl.DataFrame):
        if len(_CACHE) >= 4:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[(id(events), include_last_profiler_step, gpu_only)] = (weakref.ref(events), out)
    return out


def _cached(events: Any, include_last_profiler_step: bool, gpu_only: bool) -> HtaRows | None:
    hit = _CACHE.get((id(events), include_last_profiler_step, gpu_only))
    return hit[1] if hit is not None and hit[0]() is events else None


_CACHE: dict[tuple[int, bool, bool], tuple[weakref.ref[Any], HtaRows]] = {}


def _hta_rows(
    events: pl.DataFrame | pl.LazyFrame, include_last_profiler_step: bool, gpu_only: bool
) -> HtaRows:
    """The rows, computed in one C++ pass over the events' columns (`_core.hta_rows`,
    csrc/analysis/hta_rows.h, the rules of this module's docstring); names are tested once
    per distinct name (their codes from the import that made the column, else from
    `_core.string_codes`). A DataFrame's columns are taken as they are (no query: a Polars
    query's first use in a process costs milliseconds)."""
    from stallscope import _core

    if isinstance(events, pl.LazyFrame):
        events = events.select(*_NEEDED, "detail").collect()
    col = events.get_column
    kind = col("kind")
    # A null kind reads as counter: a kind HTA has no rows of.
    kind_all = _arrow.enum_codes(kind if kind.dtype == KIND else kind.cast(KIND), _NULL_KIND)
    rank = _arrow.int_values(col("rank"), np.int32, 0)
    name_column = col("name")
    # names[code], a null name read as "": known to the Kineto import, else one pass over the rows
    known = _arrow.known_codes(name_column)
    codes, names = known if known is not None else _core.string_codes(name_column)[::2]
    detail = col("detail")
    marks = (
        (int(rank[i]), names[codes[i]], detail[int(i)])
        for i in np.flatnonzero(kind_all == KIND_ID["mark"])
    )
    out = _core.hta_rows(
        kind_all.astype(np.uint8, copy=False),
        rank,
        _arrow.int_values(col("start_ns"), np.int64, 0),
        _arrow.int_values(col("end_ns"), np.int64, 0),
        _arrow.int_values(col("lane"), np.int32, -1),
        _arrow.int_values(col("correlation"), np.int64, 0),
        codes,
        _HTA_KIND,
        _GPU_KIND,
        KIND_ID["runtime"],
        np.array([n in SYNC_NAMES for n in names], dtype=np.uint8),
        np.array(["ProfilerStep" in n for n in names], dtype=np.uint8),
        list(_trace_facts(marks).values()),
        include_last_profiler_step,
        gpu_only,
    )
    return HtaRows(
        out["row"],
        out["rank"],
        out["kind"],
        out["name"],
        names,
        out["stream"],
        out["correlation"],
        out["is_gpu"],
        out["ts"],
        out["end"],
        out["runtime"],
        name_column,
        gpu_only=gpu_only,
    )


_NULL_KIND: Final = KIND_ID["counter"]
_NEEDED = ("rank", "kind", "name", "start_ns", "end_ns", "lane", "correlation")
# By kind code, 0 / 1 (the tables _core.hta_rows takes): whether HTA has such rows; whether the
# kind is GPU activity.
_HTA_KIND = (~kind_mask(NOT_HTA_KINDS)).astype(np.uint8)
_GPU_KIND = kind_mask(GPU_KINDS).astype(np.uint8)


_KIND_NAMES = pl.Series(KINDS, dtype=pl.String)

KERNEL_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER")
KERNEL_TYPE = pl.Enum(list(KERNEL_TYPES))
"""HTA's kernel types (hta_rows' kernel_type: its codes are the positions here)."""
_KERNEL_TYPE_NAMES = pl.Series(KERNEL_TYPES, dtype=KERNEL_TYPE)


def merge_intervals(
    rows: pl.LazyFrame | pl.DataFrame, by: str | list[str] = "rank"
) -> pl.LazyFrame:
    """HTA's merge_kernel_intervals per `by` (a column or several): sort by ts; a new interval
    starts when ts exceeds the running max of earlier ends (touching intervals merge). Columns:
    by, ts, end, sorted by `by` then ts. Unlike `_intervals.merge` (the stall table's union),
    zero-length intervals are kept: HTA's kernel time spans them.

    One NumPy pass over the rows sorted once (lexsort; string keys by their sorted order): a few
    array operations instead of Polars' windowed cum_max, group-by and second sort (28 ms -> 5-10
    ms on the 18 k kernels of the V100 trace, on this project's 2-core VM). The values are
    copies of the input's, so every sum taken over the result is the same as before, bit for
    bit."""
    by = [by] if isinstance(by, str) else by
    df = rows.lazy().select(*by, "ts", "end").collect()
    if df.height == 0:
        return df.lazy()
    codes = [_sort_codes(df[c]) for c in by]
    keep, ts, end = merge_arrays(codes, df["ts"].to_numpy(), df["end"].to_numpy())
    out = df.select(by)[_arrow.series(keep)].with_columns(
        ts=_arrow.series(ts), end=_arrow.series(end)
    )
    return out.lazy()


def merge_arrays(
    codes: list[np.ndarray[Any, Any]], ts: np.ndarray[Any, Any], end: np.ndarray[Any, Any]
) -> tuple[np.ndarray[Any, Any], ...]:
    """merge_intervals on arrays, grouped by the integer `codes` (sorted as their values):
    (the row of each merged interval's first member, its ts, its end), sorted by codes then
    ts."""
    n = ts.size
    if n == 0:
        return np.zeros(0, np.int64), ts.astype(np.float64), end.astype(np.float64)
    order = np.lexsort((ts, *reversed(codes)))  # stable: ties keep their row order
    ts_s, end_s = ts[order], end[order]
    new_group = segment_starts(*(c[order] for c in codes))
    bounds = np.flatnonzero(new_group)
    prev_max = np.empty(n, dtype=np.float64)  # running max of the group's ends before each row
    for a, b in zip(bounds, [*bounds[1:], n], strict=True):
        prev_max[a] = -np.inf
        if b - a > 1:
            prev_max[a + 1 : b] = np.maximum.accumulate(end_s[a : b - 1])
    starts = np.flatnonzero(new_group | (ts_s > prev_max))
    return (
        order[starts],
        ts_s[starts].astype(np.float64),
        np.maximum.reduceat(end_s, starts).astype(np.float64),
    )


def _sort_codes(col: pl.Series) -> np.ndarray[Any, Any]:
    """Integer codes with the column's sort order (nulls first, as Polars sorts them)."""
    if col.dtype.is_numeric() and col.null_count() == 0:
        return col.to_numpy()
    return col.rank("dense").fill_null(0).to_numpy()


def gpu_arrays(rows: HtaRows) -> tuple[np.ndarray[Any, Any], ...]:
    """(rank, ts, end, kernel type code) of the GPU rows (stream != -1) of `rows`; the code is
    the type's position in KERNEL_TYPES."""
    gpu = rows.gpu()
    return rows.rank[gpu], rows.ts[gpu], rows.end[gpu], rows.kernel_type[gpu]


def merge_by_type(rows: HtaRows, types: tuple[str, ...]) -> tuple[np.ndarray[Any, Any], ...]:
    """HTA rows of the given kernel types merged per rank and type: (rank, k (the type's index
    in `types`), ts, end) of the merged intervals, sorted by rank, k, ts; the input of `sweep`."""
    rank, ts, end, kt = gpu_arrays(rows)
    k = np.full(len(KERNEL_TYPES), -1, np.int64)
    k[[KERNEL_TYPES.index(t) for t in types]] = np.arange(len(types))
    k = k[kt]
    sel = np.flatnonzero(k >= 0)
    rank, k = rank[sel], k[sel]
    keep, mts, mend = merge_arrays([rank, k], ts[sel], end[sel])
    return rank[keep], k[keep], mts, mend


def sweep(
    rank: np.ndarray[Any, Any],
    kind: np.ndarray[Any, Any],
    ts: np.ndarray[Any, Any],
    end: np.ndarray[Any, Any],
) -> tuple[np.ndarray[Any, Any], ...]:
    """The stretches between consecutive interval boundaries, per rank, labelled by the bit sum
    of the kinds running in them (bit k for kind k, an integer: HTA's overlap sweeps). The
    intervals (rank, kind, ts, end) are already merged per rank and kind. Boundaries are sorted
    by rank and time, ties in the order (kind, start before end) that HTA's per-kind
    concatenation gives. Returns (rank, label, dur) of the stretches with a label > 0, in that
    order.

    One NumPy pass: each rank's boundaries sum to 0, so the running sum over all ranks is each
    rank's own, and a rank's last boundary (sum 0) starts no counted stretch, so a stretch never
    reaches into the next rank."""
    k = kind.astype(np.int64)
    rank = np.concatenate([rank, rank])
    time = np.concatenate([ts, end])
    status = np.concatenate([1 << k, -(1 << k)])
    part = np.concatenate([2 * k, 2 * k + 1])
    order = np.lexsort((part, time, rank))
    rank, time, running = rank[order], time[order], np.cumsum(status[order])
    counted = np.flatnonzero(running[:-1] > 0)
    return rank[counted], running[counted], time[counted + 1] - time[counted]
