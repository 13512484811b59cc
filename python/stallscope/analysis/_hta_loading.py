"""HTA's view of a trace: the rows and times HolisticTraceAnalysis 0.5.0 works on, rebuilt from an
events frame (research/kineto-and-hta.md section 1), so the HTA-identical views give its numbers.

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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from stallscope import _arrow
from stallscope._classify import hta_kernel_type
from stallscope._kineto._convert import TRACE_MARK
from stallscope._schema import GPU_KINDS, KIND, KIND_ID, KINDS, kind_mask
from stallscope._sorted import distinct, lookup, segment_starts

NOT_HTA_KINDS = ("mark", "collective", "p2p", "counter", "clock_sync", "bucket")
SYNC_NAMES = ("Event Sync", "Context Sync")


_Fact = tuple[int, int, bool, int | None]  # rank, base_ns, ts_float, row0_ns


def _trace_facts(marks: pl.DataFrame) -> dict[int, _Fact]:
    """rank -> (rank, base_ns, ts_float, row0_ns) from the importer's trace marks (`marks`:
    rows of kind mark with rank, name, detail; the first mark of a rank counts). Native runs
    have none: base 0, float timestamps."""
    out: dict[int, _Fact] = {}
    for rank, name, detail in marks.select("rank", "name", "detail").iter_rows():
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
    - ``kernel_type`` (computed from ``names``): HTA's, a position in KERNEL_TYPES, on rows with
      a stream (-1 elsewhere: no view reads it there).

    ``frame()`` gives them as the frame `hta_rows` returns."""

    row: np.ndarray[Any, Any]
    rank: np.ndarray[Any, Any]
    kind: np.ndarray[Any, Any]
    name: np.ndarray[Any, Any]
    names: pl.Series
    stream: np.ndarray[Any, Any]
    correlation: np.ndarray[Any, Any]
    is_gpu: np.ndarray[Any, Any]
    ts: np.ndarray[Any, Any]
    end: np.ndarray[Any, Any]
    runtime: np.ndarray[Any, Any]
    name_column: pl.Series  # the events' name column (`row` indexes it)
    kernel_type: np.ndarray[Any, Any] = field(init=False)
    _frame: pl.DataFrame | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # HTA's kernel type of each row with a stream, classified once per distinct name.
        types = self.names.to_frame("n").select(hta_kernel_type(pl.col("n")).cast(KERNEL_TYPE))
        type_of_name = types.to_series().to_physical().to_numpy().astype(np.int8)
        self.kernel_type = np.where(self.stream != -1, type_of_name[self.name], np.int8(-1))

    def gpu(self) -> np.ndarray[Any, Any]:
        """Positions of the rows with a stream (HTA's GPU kernel rows)."""
        return np.flatnonzero(self.stream != -1)

    def frame(self) -> pl.DataFrame:
        """rank, kind, name, ts, dur, end (µs, float64), stream, correlation, is_gpu,
        kernel_type (KERNEL_TYPE; null off GPU rows), ts_runtime (null when none); built once."""
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


def hta_rows(
    events: pl.DataFrame | pl.LazyFrame, *, include_last_profiler_step: bool = False
) -> pl.DataFrame:
    """The rows HTA analyses as a frame (`HtaRows.frame`)."""
    return hta_arrays(events, include_last_profiler_step=include_last_profiler_step).frame()


def hta_arrays(
    events: pl.DataFrame | pl.LazyFrame, *, include_last_profiler_step: bool = False
) -> HtaRows:
    """The rows HTA analyses (`HtaRows`). Memoised for the last few DataFrames seen (by
    identity, while they live), so the views called one after another on one events frame share
    this work."""
    key = (id(events), include_last_profiler_step)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is events:
        return hit[1]
    out = _hta_rows(events, include_last_profiler_step)
    if isinstance(events, pl.DataFrame):
        if len(_CACHE) >= 4:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = (weakref.ref(events), out)
    return out


_CACHE: dict[tuple[int, bool], tuple[weakref.ref[Any], HtaRows]] = {}


def _hta_rows(events: pl.DataFrame | pl.LazyFrame, include_last_profiler_step: bool) -> HtaRows:
    """The rows, computed in NumPy on the events' columns: which rows HTA keeps (and, with its
    last-step filter, in which order and how often) is settled on arrays, and names are tested
    once per distinct name (their codes from `_core.string_codes`)."""
    from stallscope import _core

    if isinstance(events, pl.DataFrame):
        ev = events
        kind_all = ev["kind"].cast(KIND).to_physical().to_numpy()
        marks = ev[_arrow.series(np.flatnonzero(kind_all == KIND_ID["mark"]))]
    else:
        ev = events.select(_NEEDED).collect()
        kind_all = ev["kind"].cast(KIND).to_physical().to_numpy()
        marks = events.filter(pl.col("kind") == "mark").select(_MARK_COLS).collect()
    facts = _trace_facts(marks)
    idx = np.flatnonzero(_HTA_KIND[kind_all])
    kind = kind_all[idx]
    rank = ev["rank"].to_numpy()[idx].astype(np.int32, copy=False)
    start = ev["start_ns"].to_numpy()[idx]
    # Per-rank facts by lookup (a handful of ranks): base_ns, and whether ts were floats.
    base = np.zeros(len(idx), dtype=np.int64)
    flt = np.ones(len(idx), dtype=bool)
    for r, b, f, _ in facts.values():
        at = rank == r
        base[at] = b
        flt[at] = f
    is_gpu_kind = _GPU_KIND[kind]
    stream = np.where(is_gpu_kind, ev["lane"].to_numpy()[idx], -1).astype(np.int64)
    corr_all = ev["correlation"].to_numpy()[idx]
    corr = np.where((is_gpu_kind | (kind == KIND_ID["runtime"])) & (corr_all != 0), corr_all, -1)
    name_column = ev["name"]
    codes, first_rows = _core.string_codes(name_column)
    names = name_column.gather(_arrow.series(first_rows)).fill_null("")
    name = codes[idx].astype(np.int64)
    is_sync = names.is_in(SYNC_NAMES).to_numpy()
    is_gpu = ((stream >= 0) & (corr >= 0)) | is_sync[name]
    ts, end = _hta_times(start - base, ev["end_ns"].to_numpy()[idx] - start, flt)
    del start, base, corr_all
    if len(idx) == 0:
        return HtaRows(idx, rank, kind, name, names, stream, corr, is_gpu, ts, end, ts, name_column)
    shift = float(ts.min())
    ts -= shift
    end -= shift
    # index_correlation: the CPU partner of each GPU row (and vice versa) by correlation. A GPU
    # row without one gets index_correlation 0, which HTA's idle breakdown then looks up as the
    # pandas label 0: the file's first row (when HTA kept it). Only GPU rows get a ts_runtime:
    # the aligned ts of the last CPU row (in row order) with the same rank and correlation.
    cpu = np.flatnonzero(~is_gpu & (corr != -1))
    gpu = np.flatnonzero(is_gpu)
    order, found, _, last = lookup(rank, corr, cpu, gpu)
    runtime = np.full(len(idx), np.nan)
    runtime[gpu[found]] = ts[cpu[order[last[found]]]]
    for r, r0 in _row0_ts(facts, shift).items():  # no partner but a correlation: the first row
        runtime[gpu[~found & (rank[gpu] == r) & (corr[gpu] >= 0)]] = r0
    step = names.str.contains("ProfilerStep", literal=True).to_numpy()[name]
    if not include_last_profiler_step and distinct(name[step]).size >= 2:
        sel = _last_step_rows(rank, corr, is_gpu, ts, step)
        idx, rank, kind, name, stream, corr, is_gpu = (
            x[sel] for x in (idx, rank, kind, name, stream, corr, is_gpu)
        )
        ts, end, runtime = ts[sel], end[sel], runtime[sel]
    return HtaRows(
        idx, rank, kind, name, names, stream, corr, is_gpu, ts, end, runtime, name_column
    )


_NEEDED = ("rank", "kind", "name", "start_ns", "end_ns", "lane", "correlation")
_MARK_COLS = ("rank", "name", "detail")
# By kind code: whether HTA has such rows; whether the kind is GPU activity.
_HTA_KIND = ~kind_mask(NOT_HTA_KINDS)
_GPU_KIND = kind_mask(GPU_KINDS)


_KIND_NAMES = pl.Series(KINDS, dtype=pl.String)

KERNEL_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER")
KERNEL_TYPE = pl.Enum(list(KERNEL_TYPES))
"""HTA's kernel types (hta_rows' kernel_type: its codes are the positions here)."""
_KERNEL_TYPE_NAMES = pl.Series(KERNEL_TYPES, dtype=KERNEL_TYPE)


def _row0_ts(facts: dict[int, _Fact], shift: float) -> dict[int, float]:
    """rank -> HTA's aligned ts of the file's first row (ranks whose first row HTA dropped are
    left out)."""
    have = [(r, row0 - base, flt) for r, base, flt, row0 in facts.values() if row0 is not None]
    ns_rel = np.array([h[1] for h in have], dtype=np.int64)
    ts, _ = _hta_times(ns_rel, np.zeros_like(ns_rel), np.array([h[2] for h in have], bool))
    return {h[0]: t - shift for h, t in zip(have, ts.tolist(), strict=True)}


def _hta_times(
    ns_rel: np.ndarray[Any, Any], dur_ns: np.ndarray[Any, Any], flt: np.ndarray[Any, Any]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(ts, end) in HTA's µs from ns since the trace's base and durations in ns. NumPy's
    division is IEEE-exact, while Polars may divide by a constant through its reciprocal,
    which breaks the last bit and so HTA's floor(ts + dur) on a few rows."""
    # Float traces: the parsed float (ns_rel < 2**53, so this is exact to the last bit).
    # Integer traces (absolute epoch µs): the integer µs, exactly.
    dur_f = dur_ns.astype(np.float64) / 1000.0
    if flt.all():  # the usual case: one kind of file, one rule (half the array passes)
        rel_f = ns_rel.astype(np.float64) / 1000.0
        return np.ceil(rel_f), np.floor(rel_f + dur_f)
    rel_i = (ns_rel // 1000).astype(np.float64)
    if not flt.any():
        return rel_i, rel_i + dur_f
    rel_f = ns_rel.astype(np.float64) / 1000.0
    ts = np.where(flt, np.ceil(rel_f), rel_i)
    end = np.where(flt, np.floor(rel_f + dur_f), rel_i + dur_f)
    return ts, end


def _last_step_rows(
    rank: np.ndarray[Any, Any],
    corr: np.ndarray[Any, Any],
    is_gpu: np.ndarray[Any, Any],
    ts: np.ndarray[Any, Any],
    step: np.ndarray[Any, Any],
) -> np.ndarray[Any, Any]:
    """HTA's last-step filter: the rows it keeps, in its order (indices, repeated where HTA's
    merge repeats a row). `step`: the rows whose name contains "ProfilerStep"."""
    # CPU rows before their rank's last step (ranks without a step keep none).
    limit = np.full(len(ts), -np.inf)
    steps = np.flatnonzero(step & ~is_gpu)
    for r in distinct(rank[steps]):
        limit[rank == r] = ts[steps[rank[steps] == r]].max()
    cpu_kept = np.flatnonzero(~is_gpu & (ts < limit))
    # GPU rows matching kept CPU rows by (rank, correlation), one copy per match (HTA's inner
    # merge), GPU rows first, each part in row order.
    gpu = np.flatnonzero(is_gpu)
    _, found, first, last = lookup(rank, corr, cpu_kept, gpu)
    copies = np.where(found, last - first + 1, 0)
    return np.concatenate([np.repeat(gpu, copies), cpu_kept])


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
