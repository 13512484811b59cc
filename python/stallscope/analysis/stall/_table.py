"""The stall table: where each step's time goes, per rank (docs/architecture.md section 5).

Every instant of a step goes to exactly one category, the first that applies:

1. ``compute``: a compute kernel runs on some GPU stream (on a CPU-only run: a region of
   category compute runs on some thread).
2. ``memcpy``: a copy or memset runs (kinds memcpy / memset, kernels classified memcpy; on a
   CPU-only run: regions of category memcpy).
3. communication, when a collective, p2p transfer or comm kernel runs:
   ``sync_wait`` while the rank waits for the last member of the collective's group to arrive
   (collectives matched across ranks by group and sequence number, see match_collectives),
   then ``network`` when the group spans more than one node, else ``interconnect``. Comm
   kernels, DDP buckets (CPU-only runs) and comm regions (CPU-only runs) carry no arrival
   information: they count as transfer, network when any collective of the rank spans more
   than one node.
4. data, while the host waits for the next batch (``data_wait`` events and regions of the data
   categories): ``data_fetch`` and ``data_prep`` where the loader reports them, ``data`` for the
   rest of the wait (the unsplit data wait).
5. ``host``: everything else (the device is idle for another reason: launch overhead, Python,
   CPU-side work).

On a CPU-only run, a thread is not computing while it is blocked on communication, even inside
a compute region: the time of a compute region on a thread (lane) does not count as compute
while that thread

- is inside a synchronous collective or p2p call it made (kind collective / p2p on the same
  lane, detail ``async`` not 1: the call returns only when the transfer is done), or
- waits for DDP's gradient all-reduces: from the start of the last bucket of a backward (DDP
  calls a bucket's comm hook when all of its gradients are ready and launches buckets in order,
  so the last bucket's start is when the gradient computation ended; the bucket with ``last=1``
  in its detail, and the latest bucket start of each rank, lane and step) until the
  communication then in flight on that thread (the union of its buckets and collectives holding
  that instant) ends. This is the research's exposed communication, "F_last - end of backward
  compute": DDP's backward returns only once the reducer's futures are done.

That time then falls to the categories below (the buckets and collectives over it make it
sync wait, network or interconnect). Buckets launched earlier, while the gradients of later
layers are still computed, stay hidden behind compute (overlapped communication); so does
work after the wait (DDP copying reduced gradients back). Compute regions on other threads keep
all of their time. GPU runs are unchanged: their compute lanes are streams, and a blocked host
thread is not a stream.

A run is a GPU run when it holds any GPU activity (kernel, memcpy, memset, gpu_sync events);
then only GPU activity counts as compute and memcpy. GPU sync rows (Stream Sync, Event Sync ...)
do no work: their time falls to the categories below (usually host or data).

How: every source interval gets the number of its category (0 = compute ... 7 = data) by a
table lookup on the kind / category codes; ranks are laid out one after another on one int64
timeline (rank r's time t at r * span + t - start of the run), so nothing is grouped by rank.
The compute intervals (the bulk: every kernel) become their union U_0 (_intervals.Union: their
starts and their ends each sorted once, in NumPy, and the cumulative gaps between them); the
other intervals (few) are cut into segments that each carry the highest priority active over
them and never cross a step boundary (_intervals.exclusive_arrays). Compute in a step is
|U_0 ∩ step|; a segment of priority k adds its length outside U_0 to category k (every length of
U_0 comes from a binary search into U_0's sorted starts); host is the step minus all of these,
so the categories sum exactly to the step time. stall_intervals (_timeline) gives the same
attribution as a timeline.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import numpy as np
import polars as pl

from stallscope._schema import kind_mask, parse_detail
from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope._utils.sorted import distinct
from stallscope.analysis._collectives import instances
from stallscope.analysis._steps import Windows, assign_steps, window_arrays
from stallscope.analysis.stall._intervals import Union, exclusive_arrays
from stallscope.analysis.stall._sources import (
    ATTRIBUTED,
    COMM_TRANSFER,
    Columns,
    P,
    columns,
    label_expr,
    labels,
    rows_of,
)

STALL_CATEGORIES: Final[tuple[str, ...]] = (*ATTRIBUTED, "host")
"""Every stall category, in priority order; ``host`` takes what no interval claims."""

STALL_COLUMNS: Final[tuple[str, ...]] = tuple(f"{c}_ns" for c in STALL_CATEGORIES)
"""The per-category columns of the stall table (ns); they sum to ``step_ns``."""

Array = np.ndarray[Any, Any]
_COLL_KIND: Final = kind_mask(("collective", "p2p"))


_Frame = TypeVar("_Frame", pl.DataFrame, pl.LazyFrame)


def comm_spans(comm: _Frame) -> _Frame:
    """The positive-length rows of ``comm`` (a thread's buckets, collectives and p2p calls:
    rank, lane with nulls as 0, start_ns, end_ns) by thread and start, each with ``_g``: the
    span of touching communication it belongs to (a new one where the thread's communication
    so far ended before the row starts). The wait for DDP's gradient all-reduces ends with
    the span that holds its start (`_blocked`)."""
    prev_end = pl.col("end_ns").cum_max().shift(1).over("rank", "lane")
    new = prev_end.is_null() | (prev_end < pl.col("start_ns"))
    real = comm.filter(pl.col("end_ns") > pl.col("start_ns")).sort("rank", "lane", "start_ns")
    return real.with_columns(_g=new.cum_sum())


def _blocked(comm: pl.LazyFrame, windows: pl.DataFrame) -> pl.LazyFrame:
    """CPU runs: when a thread is blocked on communication (rank, lane, start_ns, end_ns; may
    overlap): its synchronous collective / p2p calls (detail async not 1), and DDP's wait for
    the gradient all-reduces, from the start of the last bucket of a backward (``last=1`` in the
    bucket's detail, or the latest bucket start of the rank, lane and step: DDP calls the comm
    hook of a bucket when all its gradients are ready, so the last bucket's start is when the
    gradient computation ended) to the end of the communication then in flight on that thread
    (the union of its buckets and collectives that holds that instant)."""
    lane = pl.col("lane").fill_null(0)
    c = comm.select("rank", lane.alias("lane"), "kind", "start_ns", "end_ns", "detail")
    kind, detail = pl.col("kind"), pl.col("detail")
    is_async = parse_detail(detail, "async").fill_null("0") == "1"
    sync_calls = c.filter(kind.is_in(("collective", "p2p")) & ~is_async).select(
        "rank", "lane", "start_ns", "end_ns"
    )
    buckets = c.filter(kind == "bucket")
    flagged = buckets.filter(parse_detail(detail, "last") == "1").select(
        "rank", "lane", t="start_ns"
    )
    latest = (
        assign_steps(buckets, windows)
        .filter(pl.col("step").is_not_null())
        .group_by("rank", "lane", "step")
        .agg(t=pl.col("start_ns").max())
        .select("rank", "lane", "t")
    )
    ready = pl.concat([flagged, latest]).unique().sort("t")
    # The communication in flight per thread, merged into disjoint spans (touching ones merge).
    spans = (
        comm_spans(c)
        .group_by("_g")
        .agg(
            pl.col("rank", "lane").first(),
            _s=pl.col("start_ns").min(),
            _e=pl.col("end_ns").max(),
        )
        .sort("_s")
    )
    waits = (
        ready.join_asof(
            spans.drop("_g"),
            left_on="t",
            right_on="_s",
            by=["rank", "lane"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("_e") > pl.col("t"))
        .select("rank", "lane", start_ns="t", end_ns="_e")
    )
    return pl.concat([sync_calls, waits])


def _cpu_compute(c: Columns, windows: Windows, rows: Array) -> tuple[Array, ...]:
    """CPU runs: rank, start_ns, end_ns of the compute regions (`rows`: their indices) minus
    the time their thread (lane) is blocked on communication (`_blocked`); regions on other
    threads keep all of their time. One sweep per affected thread, vectorised: where at least
    one compute region and no blocked span is active."""
    if c.comm is None:  # nothing to block on (and no query to plan: ~10 ms cold)
        return c.take(rows)
    comm = c.comm.lazy()
    blocked = (
        _blocked(comm, windows.frame()).filter(pl.col("end_ns") > pl.col("start_ns")).collect()
    )
    if blocked.height == 0:
        return c.take(rows)
    regions = (
        c.frame.select("rank", "lane", "start_ns", "end_ns")[_arrow.series(rows)]
        .lazy()
        .with_columns(pl.col("lane").fill_null(0))
    )
    keys = blocked.lazy().select("rank", "lane").unique()
    free = regions.join(keys, on=["rank", "lane"], how="anti")
    hit = regions.join(keys, on=["rank", "lane"], how="semi")
    one = pl.lit(1, pl.Int32)
    zero = pl.lit(0, pl.Int32)
    edges = pl.concat(
        [
            hit.select("rank", "lane", t="start_ns", dc=one, db=zero),
            hit.select("rank", "lane", t="end_ns", dc=-one, db=zero),
            blocked.lazy().select("rank", "lane", t="start_ns", dc=zero, db=one),
            blocked.lazy().select("rank", "lane", t="end_ns", dc=zero, db=-one),
        ]
    )
    key = ["rank", "lane"]
    sweep = (
        edges.group_by("rank", "lane", "t")
        .agg(pl.col("dc", "db").sum())
        .sort("rank", "lane", "t")
        .with_columns(
            _c=pl.col("dc").cum_sum().over(key),
            _b=pl.col("db").cum_sum().over(key),
            _n=pl.col("t").shift(-1).over(key),
        )
        .filter((pl.col("_c") > 0) & (pl.col("_b") == 0) & (pl.col("_n") > pl.col("t")))
        .select("rank", "lane", start_ns="t", end_ns="_n")
    )
    out = pl.concat([free, sweep]).select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns")
    df = out.collect()
    return df["rank"].to_numpy(), df["start_ns"].to_numpy(), df["end_ns"].to_numpy()


def _collective_intervals(comm: pl.DataFrame, match: bool) -> tuple[tuple[Array, ...], Array]:
    """((rank, label, start_ns, end_ns) of the collectives' intervals, the ranks with any
    collective spanning more than one node).

    A collective's sync wait is match_collectives' sync_wait_ns (its time before the last
    member of its instance arrived), computed here without the rest of that table: in NumPy,
    on the instance keys of `instances`. Without `match`, no collective is matched: all of
    each one's time is transfer (the view of a rank alone, see _exposed.py)."""
    keys = instances(comm)
    inst, nnodes = keys.instance, keys.nnodes
    if not match:
        inst = np.full(inst.shape, -1, np.int64)
    rank = comm["rank"].to_numpy().astype(np.int32)
    start, end = comm["start_ns"].to_numpy(), comm["end_ns"].to_numpy()
    transfer = np.where(nnodes > 1, P["network"], P["interconnect"]).astype(np.int32)
    matched = np.flatnonzero(inst >= 0)
    lone = np.flatnonzero(inst < 0)  # no group: cannot be matched, all of it is transfer
    last = np.full(int(inst.max(initial=-1)) + 1, np.iinfo(np.int64).min)
    np.maximum.at(last, inst[matched], start[matched])  # last arrival per instance
    s, e = start[matched], end[matched]
    wait_end = s + np.maximum(np.minimum(last[inst[matched]], e) - s, 0)
    wait = np.full(len(matched), P["sync_wait"], np.int32)
    parts = (  # waits, the rest of the matched rows, the lone rows: Polars' order before
        (rank[matched], wait, s, wait_end),
        (rank[matched], transfer[matched], wait_end, e),
        (rank[lone], transfer[lone], start[lone], end[lone]),
    )
    cols = tuple(np.concatenate([p[i] for p in parts]) for i in range(4))
    keep = cols[3] > cols[2]
    multi = rank[nnodes > 1]
    return tuple(c[keep] for c in cols), np.array(sorted(set(multi.tolist())), dtype=np.int32)


@dataclass
class _FlatWindows:
    """The step windows and where they lie on the flat timeline (ranks laid end to end)."""

    steps: Windows  # sorted by rank, then start
    offset: Array  # rank * span - start of the run: flat = ns + offset

    @property
    def height(self) -> int:
        return len(self.steps.rank)

    @property
    def start(self) -> Array:  # flat
        out: Array = self.steps.start + self.offset
        return out

    @property
    def end(self) -> Array:  # flat
        out: Array = self.steps.end + self.offset
        return out

    def frame(self) -> pl.DataFrame:
        """rank, step, start_ns, end_ns, step_ns, offset, start, end (flat), one row each."""
        return self.steps.frame().with_columns(
            offset=_arrow.series(self.offset, dtype=pl.Int64),
            start=_arrow.series(self.start, dtype=pl.Int64),
            end=_arrow.series(self.end, dtype=pl.Int64),
        )


@dataclass
class Prepared:
    """Intervals on the flat timeline (ranks laid end to end, clipped to their steps)."""

    compute: Union  # the union of the intervals of priority 0: the bulk of the events
    rest: tuple[Array, Array, Array]  # label, start, end of priorities 1.., sorted by start
    windows: _FlatWindows  # sorted by start (flat), which is by rank, then start_ns
    gpu: bool = False  # the events were taken as a GPU run (module docstring)
    multi: Array | None = None  # ranks with a collective spanning more than one node
    comm: pl.DataFrame | None = None  # the collective, p2p and bucket rows (Columns.comm)


Flat = Callable[[Array, Array, Array], tuple[Array, Array, Array]]


def _flat_union(flat: Flat, rank: Array, start: Array, end: Array) -> Union:
    """The union of the non-empty intervals (rank, start_ns, end_ns) on the flat timeline."""
    real = end > start
    s, e, ok = flat(rank[real], start[real], end[real])
    return Union(s[ok], e[ok])


def _bulk(
    c: Columns, gpu: bool, span: int, lo_all: int, hi_all: int
) -> tuple[Union | None, Array, tuple[Array, ...]]:
    """prepare's passes over every row for frames of PARALLEL_ROWS or more, in Polars (all
    threads): (GPU runs: the compute union, else None; CPU runs: the compute rows; label,
    rank, start, end of the other rows)."""
    # One pass gives every row its label; on GPU runs compute (the bulk: every kernel) stays
    # in Polars up to its flat start and end, the other rows (few) become arrays.
    labelled = c.frame.lazy().with_columns(_label=label_expr(gpu))
    real = pl.col("end_ns") > pl.col("start_ns")
    compute = pl.col("_label") == P["compute"]
    other = labelled.filter((pl.col("_label") > P["compute"]) & real)
    union, rows = None, np.zeros(0, np.int64)
    if gpu:
        shift = pl.col("rank").cast(pl.Int64) * span - lo_all
        flat_df, other_df = pl.collect_all(
            [
                labelled.filter(compute & real)
                .select(
                    start=pl.col("start_ns").clip(lo_all, hi_all) + shift,
                    end=pl.col("end_ns").clip(lo_all, hi_all) + shift,
                )
                .filter(pl.col("end") > pl.col("start")),
                other,
            ]
        )
        # Our own copies: Union sorts them in place.
        union = Union(
            flat_df["start"].to_numpy(writable=True), flat_df["end"].to_numpy(writable=True)
        )
    else:
        other_df, rows_df = pl.collect_all([other, labelled.select(pl.arg_where(compute))])
        rows = rows_df.to_series().to_numpy()
    return (
        union,
        rows,
        (
            other_df["_label"].to_numpy().astype(np.int32),
            other_df["rank"].to_numpy(),
            other_df["start_ns"].to_numpy(),
            other_df["end_ns"].to_numpy(),
        ),
    )


def prepare(
    events: pl.DataFrame | pl.LazyFrame,
    *,
    match: bool = True,
    gpu: bool = False,
    multi: Array | None = None,
) -> Prepared:
    """The flat intervals of `events`. `match`: split collectives into sync wait and transfer
    by their matched instances (False: all transfer). `gpu`: take the events as a GPU run even
    when they hold no GPU activity; `multi`: ranks taken as spanning nodes even when these
    events hold no multi-node collective of theirs (a batch of a larger run, see _exposed.py)."""
    c = columns(events)
    rw = c.rows
    win = window_arrays(c.frame, None if rw is None else (rw.kind, rw.rank, rw.start, rw.end))
    none = np.zeros(0, np.int64)
    gpu = c.gpu or gpu  # GPU activity: then only GPU rows compute (module docstring)
    if len(win.rank) == 0:
        return Prepared(
            Union(none, none),
            (none.astype(np.int32), none, none),
            _FlatWindows(win, none),
            gpu,
            multi,
            c.comm,
        )
    lo_all, hi_all = int(win.start.min()), int(win.end.max())
    span = hi_all - lo_all + 1
    low, top = int(win.rank.min()), int(win.rank.max())
    if low < 0 or (top + 1) * span >= 2**62:
        raise ValueError(
            f"ranks {low}..{top} over {span} ns do not fit one int64 "
            "timeline; ranks must be non-negative and the run shorter than 2**62 / ranks ns"
        )

    def flat(rank: Array, start: Array, end: Array) -> tuple[Array, Array, Array]:
        """start, end on the flat timeline (rank r's time t is at r * span + t - lo_all,
        clipped to the run's steps, so ranks never meet; what lies outside the rank's own
        steps is never measured) and the mask of the intervals left non-empty."""
        shift = rank.astype(np.int64)
        shift *= span
        shift -= lo_all
        s = np.clip(start, lo_all, hi_all)
        s += shift
        e = np.clip(end, lo_all, hi_all)
        e += shift
        return s, e, e > s

    if rw is not None:  # the same steps in NumPy: no per-query cost
        label = labels(rw, gpu)
        rank_all, st, en = rw.rank, rw.start, rw.end
        rows = np.flatnonzero(label == P["compute"])
        union = _flat_union(flat, rank_all[rows], st[rows], en[rows]) if gpu else None
        oth = np.flatnonzero((label > P["compute"]) & (en > st))
        lab, rank, start, end = label[oth], rank_all[oth], st[oth], en[oth]
    else:
        union, rows, (lab, rank, start, end) = _bulk(c, gpu, span, lo_all, hi_all)
    if union is None:  # CPU runs: compute regions minus the time their thread is blocked
        union = _flat_union(flat, *_cpu_compute(c, win, rows))
    multi = np.zeros(0, np.int32) if multi is None else np.asarray(multi, np.int32)
    parts = []
    is_coll = _COLL_KIND[c.comm_kind()]
    if c.comm is not None and is_coll.any():
        comm = c.comm if is_coll.all() else rows_of(c.comm, is_coll)
        (k_rank, k_label, k_start, k_end), found = _collective_intervals(comm, match)
        multi = distinct(np.concatenate((multi, found)).astype(np.int32))
        parts.append((k_label, *flat(k_rank, k_start, k_end)))
    # Comm kernels, buckets, comm regions: transfer, network when any collective of the
    # rank spans more than one node.
    transfer = lab == COMM_TRANSFER
    if transfer.any():
        net = np.isin(rank[transfer], multi)
        lab[transfer] = np.where(net, P["network"], P["interconnect"])
    parts.append((lab, *flat(rank, start, end)))
    rl = np.concatenate([p[0][p[3]] for p in parts]).astype(np.int32)
    rs = np.concatenate([p[1][p[3]] for p in parts])
    re_ = np.concatenate([p[2][p[3]] for p in parts])
    order = np.argsort(rs, kind="stable")
    offset = win.rank.astype(np.int64) * span - lo_all
    return Prepared(
        union, (rl[order], rs[order], re_[order]), _FlatWindows(win, offset), gpu, multi, c.comm
    )


def empty_table() -> pl.DataFrame:
    schema: dict[str, pl.DataType] = {
        "rank": pl.Int32(),
        "step": pl.Int64(),
        "start_ns": pl.Int64(),
        "end_ns": pl.Int64(),
        "step_ns": pl.Int64(),
    }
    schema.update({c: pl.Int64() for c in STALL_COLUMNS})
    return pl.DataFrame(schema=schema)


def _locate_arrays(start: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """`_locate` on arrays: per segment start, the index of the window (ws, we sorted by ws,
    disjoint) holding it, -1 outside every window (empty windows hold nothing)."""
    real = np.flatnonzero(we > ws)
    j = np.searchsorted(ws[real], start, side="right") - 1
    jj = real[np.maximum(j, 0)] if real.size else np.zeros(start.shape, np.intp)
    hit = (j >= 0) & (start < we[jj]) if real.size else np.zeros(start.shape, bool)
    return np.where(hit, jj, -1).astype(np.int64)


@fair_gil
def stall_table(events: pl.DataFrame | pl.LazyFrame | str | os.PathLike[str]) -> pl.DataFrame:
    """One row per rank and step: rank, step, start_ns, end_ns, step_ns and the time (ns) of
    each stall category (`STALL_COLUMNS`: compute_ns, memcpy_ns, sync_wait_ns, network_ns,
    interconnect_ns, data_fetch_ns, data_prep_ns, data_ns, host_ns), which sum to step_ns.

    `events` is what stallscope.load / scan or stallscope.import_kineto returns, or a run
    directory: then its ranks are read a batch at a time (`stream_run`), with the same result
    as for load(run_dir), in the memory of one batch. Frames of NATIVE_ROWS or more take the
    native path (_native.py), others NumPy: the same table. Steps are the windows of
    step_windows; a run without step markers gives an empty table."""
    if isinstance(events, (str, os.PathLike)):
        from stallscope.analysis.stall._streaming import stall_table_run

        return stall_table_run(events)
    if isinstance(events, pl.DataFrame) and events.height >= NATIVE_ROWS:
        from stallscope.analysis.stall._native import native_stall_table

        return native_stall_table(events)
    return stall_table_polars(events)


NATIVE_ROWS: Final = 1_000_000  # from here the native path; below, NumPy tuned to need no query


def stall_table_polars(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The stall table in NumPy and Polars (the reference; the module docstring)."""
    p = prepare(events)
    if p.windows.height == 0:
        return empty_table()
    return table_frame(p.windows.steps, category_sums(p, segments(p)))


@dataclass
class Segments:
    """The non-compute intervals cut into disjoint segments on the flat timeline, each with
    the highest priority active over it (label), none crossing a step boundary, each inside
    window ``w`` (the index of its step); sorted by start."""

    label: Array
    start: Array
    end: Array
    w: Array


def segments(p: Prepared) -> Segments:
    """The segments of `p`'s non-compute intervals (`Segments`)."""
    ws, we = p.windows.start, p.windows.end
    label, ss, se = exclusive_arrays(*p.rest, len(ATTRIBUTED), np.concatenate((ws, we)))
    seg_w = _locate_arrays(ss, ws, we)
    inside = seg_w >= 0
    return Segments(label[inside], ss[inside], se[inside], seg_w[inside])


def category_sums(p: Prepared, seg: Segments) -> Array:
    """Each window's time per ATTRIBUTED category (a row per window, ns). Compute (the bulk)
    is one Union (U_0); a segment of priority k counts for category k where U_0 does not cover
    it. Every length of U_0 needed (inside each step, inside each segment) comes from
    U_0.before."""
    w = p.windows
    u0 = p.compute
    nl = len(ATTRIBUTED)
    sums = np.zeros(w.height * nl, np.int64)  # (window, category) -> ns
    sums[0::nl] = u0.before(w.end) - u0.before(w.start)
    ss, se = seg.start, seg.end
    np.add.at(sums, seg.w * nl + seg.label, (se - ss) - (u0.before(se) - u0.before(ss)))
    return sums.reshape(-1, nl)


def table_frame(win: Windows, grid: Array) -> pl.DataFrame:
    """stall_table's frame from the windows (by rank, then start) and each one's time per
    ATTRIBUTED category (a row per window): host is the rest of the step. Rows sorted by rank,
    then step (a null step first), windows of equal rank and step by start."""
    step_ns = win.end - win.start
    host = step_ns - grid.sum(axis=1)
    null = win.step_null if win.step_null is not None and win.step_null.any() else None
    not_null = np.ones(len(win.rank), bool) if null is None else ~null
    order = np.lexsort((win.step, not_null, win.rank))
    step = _arrow.series(win.step[order], "step", pl.Int64)
    if null is not None:
        step = step.scatter(np.flatnonzero(null[order]), None)
    per = {f"{c}_ns": grid[order, j] for j, c in enumerate(ATTRIBUTED)}
    return _arrow.frame(
        {
            "rank": win.rank[order].astype(np.int32),
            "step": step,
            "start_ns": win.start[order],
            "end_ns": win.end[order],
            "step_ns": step_ns[order],
            **per,
            "host_ns": host[order],
        }
    )
