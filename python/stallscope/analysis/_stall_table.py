"""The stall table: where each step's time goes, per rank, in DESIGN.md's categories.

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
so the categories sum exactly to the step time. stall_intervals gives the same attribution as a
timeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from stallscope import _arrow
from stallscope._schema import CATEGORIES, KINDS, conform, parse_detail
from stallscope.analysis._collectives import collectives
from stallscope.analysis._intervals import Union, exclusive, exclusive_arrays
from stallscope.analysis._steps import assign_steps, step_windows

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

STALL_CATEGORIES: Final[tuple[str, ...]] = (*ATTRIBUTED, "host")
"""Every stall category, in priority order; ``host`` takes what no interval claims."""

STALL_COLUMNS: Final[tuple[str, ...]] = tuple(f"{c}_ns" for c in STALL_CATEGORIES)
"""The per-category columns of the stall table (ns); they sum to ``step_ns``."""

GPU_KINDS: Final[tuple[str, ...]] = ("kernel", "memcpy", "memset", "gpu_sync")

_P: Final[dict[str, int]] = {c: i for i, c in enumerate(ATTRIBUTED)}
_COMM_TRANSFER: Final = 100  # placeholder label: network or interconnect by the rank's nodes
_DATA_CATS: Final = ("data", "data_fetch", "data_prep")


_NEEDED: Final = ("rank", "kind", "category", "start_ns", "end_ns", "correlation", "lane")
_COMM_KINDS: Final = ("collective", "p2p", "bucket")


def _sources(events: pl.DataFrame | pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """(every event, only the columns the table needs; the collective / p2p / bucket events,
    collected). A lazy source (stallscope.scan) is read once, without payload sizes (the table
    does not use them; collectives get 0)."""
    lf = conform(events)
    is_comm = pl.col("kind").is_in(_COMM_KINDS)
    if isinstance(events, pl.LazyFrame):
        # Names and details are needed for the comm events only (matched by group, op, seq).
        ev = lf.select(*_NEEDED, "name", "detail").collect().lazy()
        comm = ev.filter(is_comm).with_columns(bytes=pl.lit(0, pl.Int64))
        return ev, comm.collect().lazy()
    comm = lf.filter(is_comm).select(*_NEEDED, "name", "detail", "bytes")
    return lf.select(_NEEDED), comm.collect().lazy()


def is_gpu_run(events: pl.DataFrame | pl.LazyFrame) -> bool:
    """Whether the events hold GPU activity (then the device lanes are GPU streams)."""
    hit = events.lazy().filter(pl.col("kind").is_in(GPU_KINDS)).select(pl.len()).collect().item()
    return bool(hit)


def _label_of(kind: str, category: str, gpu: bool) -> int | None:
    """The priority label of a non-collective event (None: claims no time); the rules of the
    module docstring."""
    region = kind == "region"
    if kind == "data_wait" or (region and category in _DATA_CATS):
        return _P[category] if category in _DATA_CATS else _P["data"]
    if gpu:
        if kind == "kernel":
            return {"comm": _COMM_TRANSFER, "memcpy": _P["memcpy"], "sync": None}.get(
                category, _P["compute"]
            )
        return _P["memcpy"] if kind in ("memcpy", "memset") else None
    if region and category in ("compute", "memcpy"):
        return _P[category]
    if kind == "bucket" or (region and category == "comm"):
        return _COMM_TRANSFER
    return None


def _label_table(gpu: bool) -> pl.Series:
    """Label by ``kind_code * len(CATEGORIES) + category_code`` (the Enums' physical codes)."""
    return pl.Series([_label_of(k, c, gpu) for k in KINDS for c in CATEGORIES], dtype=pl.Int32)


def _is_compute(gpu: bool) -> pl.Expr:
    """Events of priority 0 (the same rules as _label_of, as Enum comparisons: cheap)."""
    kind, cat = pl.col("kind"), pl.col("category")
    if gpu:
        return (kind == "kernel") & ~cat.is_in(("comm", "memcpy", "sync"))
    return (kind == "region") & (cat == "compute")


def _labelled(ev: pl.LazyFrame, gpu: bool, compute: bool) -> pl.LazyFrame:
    """rank, label, start_ns, end_ns of the non-collective sources of priority 0 (`compute`)
    or of the others (label = priority, or _COMM_TRANSFER; by a table lookup on the Enum codes
    of the few rows that can carry one)."""
    real = pl.col("end_ns") > pl.col("start_ns")
    if compute:
        return ev.filter(_is_compute(gpu) & real).select(
            "rank", pl.lit(_P["compute"], pl.Int32).alias("label"), "start_ns", "end_ns"
        )
    kinds: tuple[str, ...] = ("kernel", "memcpy", "memset", "data_wait", "region")
    if not gpu:
        kinds = ("region", "bucket", "data_wait")
    code = pl.col("kind").to_physical().cast(pl.Int32) * len(CATEGORIES) + pl.col(
        "category"
    ).to_physical().cast(pl.Int32)
    label = pl.lit(_label_table(gpu)).gather(code)
    return (
        ev.filter(pl.col("kind").is_in(kinds) & ~_is_compute(gpu) & real)
        .select("rank", label.alias("label"), "start_ns", "end_ns")
        .filter(pl.col("label").is_not_null())
    )


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
    real = c.filter(pl.col("end_ns") > pl.col("start_ns")).sort("rank", "lane", "start_ns")
    prev_end = pl.col("end_ns").cum_max().shift(1).over("rank", "lane")
    spans = (
        real.with_columns(_new=(prev_end.is_null() | (prev_end < pl.col("start_ns"))))
        .with_columns(_g=pl.col("_new").cum_sum())
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


def _cpu_compute(ev: pl.LazyFrame, comm: pl.LazyFrame, windows: pl.DataFrame) -> pl.LazyFrame:
    """CPU runs: rank, label, start_ns, end_ns of the compute regions minus the time their
    thread (lane) is blocked on communication (`_blocked`); regions on other threads keep
    all of their time. One sweep per affected thread, vectorised: where at least one compute
    region and no blocked span is active."""
    regions = ev.filter(_is_compute(False) & (pl.col("end_ns") > pl.col("start_ns"))).select(
        "rank", pl.col("lane").fill_null(0), "start_ns", "end_ns"
    )
    blocked = _blocked(comm, windows).filter(pl.col("end_ns") > pl.col("start_ns")).collect()
    out = pl.lit(_P["compute"], pl.Int32).alias("label")
    if blocked.height == 0:
        return regions.select("rank", out, "start_ns", "end_ns")
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
    return pl.concat([free, sweep]).select(pl.col("rank").cast(pl.Int32), out, "start_ns", "end_ns")


def _collective_intervals(ev: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """(intervals of collectives: rank, label, start_ns, end_ns; per rank ``multi_node``).

    A collective's sync wait is match_collectives' sync_wait_ns (its time before the last
    member of its instance arrived), computed here without the rest of that table."""
    c = collectives(ev).collect().lazy()
    transfer = (
        pl.when(pl.col("nnodes").fill_null(1) > 1)
        .then(pl.lit(_P["network"], pl.Int32))
        .otherwise(pl.lit(_P["interconnect"], pl.Int32))
    )
    # Instances: (group, seq) and, for kind collective, the name (see match_collectives).
    op_key = pl.when(pl.col("kind") == "collective").then(pl.col("name")).otherwise(pl.lit(""))
    last_arrival = pl.col("start_ns").max().over("group", op_key, "seq")
    wait_end = pl.col("start_ns") + (
        pl.min_horizontal(last_arrival, pl.col("end_ns")) - pl.col("start_ns")
    ).clip(lower_bound=0)
    matched = c.filter(pl.col("group").is_not_null()).with_columns(_wait_end=wait_end)
    waits = matched.select(
        "rank", label=pl.lit(_P["sync_wait"], pl.Int32), start_ns="start_ns", end_ns="_wait_end"
    )
    rest = matched.select("rank", label=transfer, start_ns="_wait_end", end_ns="end_ns")
    # Collectives without a group cannot be matched: all of their time is transfer.
    lone = c.filter(pl.col("group").is_null()).select(
        "rank", label=transfer, start_ns="start_ns", end_ns="end_ns"
    )
    per_rank = c.group_by("rank").agg(multi_node=(pl.col("nnodes").fill_null(1) > 1).any())
    out = pl.concat([waits, rest, lone]).filter(pl.col("end_ns") > pl.col("start_ns"))
    return out, per_rank


@dataclass
class _Prepared:
    """Intervals on the flat timeline (ranks laid end to end, clipped to their steps)."""

    compute: Union  # the union of the intervals of priority 0: the bulk of the events
    rest: pl.DataFrame  # label, start, end of priorities 1.., sorted by start
    windows: pl.DataFrame  # rank, step, start_ns, end_ns, step_ns, start, end (flat), offset


def _prepare(events: pl.DataFrame | pl.LazyFrame) -> _Prepared:
    ev, comm_events = _sources(events)
    windows = step_windows(ev).select(
        pl.col("rank").cast(pl.Int32), "step", "start_ns", "end_ns", "step_ns"
    )
    empty = pl.DataFrame(schema={"start": pl.Int64, "end": pl.Int64})
    if windows.height == 0:
        w = windows.with_columns(start="start_ns", end="end_ns", offset=pl.lit(0, pl.Int64))
        none = np.zeros(0, np.int64)
        return _Prepared(Union(none, none), empty.with_columns(label=pl.lit(0, pl.Int32)), w)
    gpu = is_gpu_run(ev)
    lo_all, hi_all = int(windows["start_ns"].min()), int(windows["end_ns"].max())  # type: ignore[arg-type]
    span = hi_all - lo_all + 1
    low, top = int(windows["rank"].min()), int(windows["rank"].max())  # type: ignore[arg-type]
    if low < 0 or (top + 1) * span >= 2**62:
        raise ValueError(
            f"ranks {low}..{top} over {span} ns do not fit one int64 "
            "timeline; ranks must be non-negative and the run shorter than 2**62 / ranks ns"
        )
    coll, per_rank = _collective_intervals(
        comm_events.filter(pl.col("kind").is_in(("collective", "p2p")))
    )

    def flat(lf: pl.LazyFrame) -> pl.LazyFrame:
        """rank, label, start, end on the flat timeline: rank r's time t is at
        r * span + t - lo_all (clipped to the run's steps, so ranks never meet; what lies
        outside the rank's own steps is never measured)."""
        shift = pl.col("rank").cast(pl.Int64) * span - lo_all
        return lf.select(
            "rank",
            "label",
            start=pl.col("start_ns").clip(lo_all, hi_all) + shift,
            end=pl.col("end_ns").clip(lo_all, hi_all) + shift,
        ).filter(pl.col("end") > pl.col("start"))

    compute_src = (
        _labelled(ev, gpu, compute=True) if gpu else _cpu_compute(ev, comm_events, windows)
    )
    compute_lf = flat(compute_src).select("start", "end")
    # Collected one by one: together, Polars would cache their common input (all events).
    base = flat(_labelled(ev, gpu, compute=False)).collect()
    coll_flat = flat(coll).collect()
    compute_df = compute_lf.collect()
    label = pl.col("label")
    comm = (
        base.lazy()
        .filter(label == _COMM_TRANSFER)
        .join(per_rank, on="rank", how="left")
        .with_columns(
            label=pl.when(pl.col("multi_node").fill_null(False))
            .then(pl.lit(_P["network"], pl.Int32))
            .otherwise(pl.lit(_P["interconnect"], pl.Int32))
        )
    )
    rest_df = (
        pl.concat(
            [
                base.lazy().filter(label != _COMM_TRANSFER),
                comm.select(base.columns),
                coll_flat.lazy(),
            ]
        )
        .select("label", "start", "end")
        .sort("start")
        .collect()
    )
    compute = Union(
        compute_df["start"].to_numpy(writable=True), compute_df["end"].to_numpy(writable=True)
    )
    del compute_df
    offset = pl.col("rank").cast(pl.Int64) * span - lo_all
    w = (
        windows.with_columns(offset=offset)
        .with_columns(
            start=pl.col("start_ns") + pl.col("offset"), end=pl.col("end_ns") + pl.col("offset")
        )
        .sort("start")
    )
    return _Prepared(compute, rest_df, w)


def _empty_table() -> pl.DataFrame:
    schema: dict[str, pl.DataType] = {
        "rank": pl.Int32(),
        "step": pl.Int64(),
        "start_ns": pl.Int64(),
        "end_ns": pl.Int64(),
        "step_ns": pl.Int64(),
    }
    schema.update({c: pl.Int64() for c in STALL_COLUMNS})
    return pl.DataFrame(schema=schema)


def _locate(segments: pl.LazyFrame, windows: pl.LazyFrame) -> pl.LazyFrame:
    """`segments` (sorted by start, none crossing a window boundary) with the index ``_w`` of the
    window holding each; segments outside every window are dropped."""
    return (
        segments.join_asof(
            windows.filter(pl.col("end") > pl.col("start")).select("_w", _ws="start", _we="end"),
            left_on="start",
            right_on="_ws",
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("start") < pl.col("_we"))
        .drop("_ws", "_we")
    )


def _locate_arrays(start: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """`_locate` on arrays: per segment start, the index of the window (ws, we sorted by ws,
    disjoint) holding it, -1 outside every window (empty windows hold nothing)."""
    real = np.flatnonzero(we > ws)
    j = np.searchsorted(ws[real], start, side="right") - 1
    jj = real[np.maximum(j, 0)] if real.size else np.zeros(start.shape, np.intp)
    hit = (j >= 0) & (start < we[jj]) if real.size else np.zeros(start.shape, bool)
    return np.where(hit, jj, -1).astype(np.int64)


def stall_table(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank and step: rank, step, start_ns, end_ns, step_ns and the time (ns) of
    each stall category (`STALL_COLUMNS`: compute_ns, memcpy_ns, sync_wait_ns, network_ns,
    interconnect_ns, data_fetch_ns, data_prep_ns, data_ns, host_ns), which sum to step_ns.

    `events` is what stallscope.load / scan or stallscope.import_kineto returns. Steps are the
    windows of step_windows; a run without step markers gives an empty table."""
    p = _prepare(events)
    w = p.windows
    if w.height == 0:
        return _empty_table()
    # Compute (the bulk) is one Union (U_0). The other intervals (few) are cut into segments
    # that each carry the highest priority active over them (and never cross a step boundary);
    # a segment of priority k counts for category k where U_0 does not cover it. Every length
    # of U_0 needed (inside each step, inside each segment) comes from U_0.before.
    ws, we = w["start"].to_numpy(), w["end"].to_numpy()
    rest = p.rest
    label, ss, se = exclusive_arrays(
        rest["label"].to_numpy(),
        rest["start"].to_numpy(),
        rest["end"].to_numpy(),
        len(ATTRIBUTED),
        np.concatenate((ws, we)),
    )
    seg_w = _locate_arrays(ss, ws, we)
    inside = seg_w >= 0
    label, ss, se, seg_w = label[inside], ss[inside], se[inside], seg_w[inside]
    u0 = p.compute
    nl = len(ATTRIBUTED)
    sums = np.zeros(w.height * nl, np.int64)  # (window, category) -> ns
    sums[0::nl] = u0.before(we) - u0.before(ws)
    np.add.at(sums, seg_w * nl + label, (se - ss) - (u0.before(se) - u0.before(ss)))
    grid = sums.reshape(-1, nl)
    per = _arrow.frame({f"{c}_ns": grid[:, j] for j, c in enumerate(ATTRIBUTED)})
    claimed = pl.sum_horizontal([pl.col(f"{c}_ns") for c in ATTRIBUTED])
    return (
        pl.concat([w, per], how="horizontal")
        .with_columns(host_ns=pl.col("step_ns") - claimed)
        .select("rank", "step", "start_ns", "end_ns", "step_ns", *STALL_COLUMNS)
        .sort("rank", "step")
    )


def stall_intervals(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The attributed timeline: rank, step, category (one of `STALL_CATEGORIES`), start_ns,
    end_ns, sorted by rank and start. The intervals of a rank are disjoint, cover each of its
    steps exactly and never cross a step boundary; their lengths summed per rank, step and
    category give stall_table."""
    p = _prepare(events)
    w = p.windows
    schema = {
        "rank": pl.Int32(),
        "step": pl.Int64(),
        "category": pl.Enum(list(STALL_CATEGORIES)),
        "start_ns": pl.Int64(),
        "end_ns": pl.Int64(),
    }
    if w.height == 0:
        return pl.DataFrame(schema=schema)
    windows = w.lazy().select("start", "end").with_row_index("_w")
    cuts = pl.concat([windows.select(t="start"), windows.select(t="end")])
    host = len(ATTRIBUTED)
    everything = pl.concat(
        [
            p.compute.intervals().lazy().with_columns(label=pl.lit(0, pl.Int32)),
            p.rest.lazy(),
            windows.select("start", "end", label=pl.lit(host, pl.Int32)),
        ],
        how="diagonal",
    )
    segs = _locate(exclusive(everything, host + 1, cuts), windows)
    # Neighbouring segments of one category in one step become one interval.
    new = (
        (pl.col("label") != pl.col("label").shift(1))
        | (pl.col("start") != pl.col("end").shift(1))
        | (pl.col("_w") != pl.col("_w").shift(1))
    ).fill_null(True)
    segs = (
        segs.with_columns(_g=new.cum_sum())
        .group_by("_g")
        .agg(pl.col("_w", "label").first(), pl.col("start").min(), pl.col("end").max())
    )
    names = pl.Series(list(STALL_CATEGORIES), dtype=schema["category"])
    info = w.lazy().with_row_index("_w").select("_w", "rank", "step", "offset")
    return (
        segs.join(info, on="_w", how="left")
        .select(
            "rank",
            "step",
            pl.lit(names).gather(pl.col("label")).alias("category"),
            start_ns=pl.col("start") - pl.col("offset"),
            end_ns=pl.col("end") - pl.col("offset"),
        )
        .sort("rank", "start_ns")
        .collect()
    )
