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

A run is a GPU run when it holds any GPU activity (kernel, memcpy, memset, gpu_sync events);
then only GPU activity counts as compute and memcpy. GPU sync rows (Stream Sync, Event Sync ...)
do no work: their time falls to the categories below (usually host or data).

How: every source interval gets the number of its category (0 = compute ... 7 = data); ranks are
laid out one after another on one timeline (intervals clipped to the rank's steps); with a
single sort, the union U_k of the intervals of categories 0..k is built for every k, and the
time of category k in a step is |U_k ∩ step| - |U_(k-1) ∩ step|, host the rest. The categories
therefore sum exactly to the step time.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from stallscope._schema import conform
from stallscope.analysis._collectives import collectives, match_collectives
from stallscope.analysis._intervals import (
    difference,
    flatten_offsets,
    measure_within,
    merge_sorted,
)
from stallscope.analysis._steps import step_windows

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


def _lazy_events(events: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    return conform(events)


def is_gpu_run(events: pl.DataFrame | pl.LazyFrame) -> bool:
    """Whether the events hold GPU activity (then the device lanes are GPU streams)."""
    hit = events.lazy().filter(pl.col("kind").is_in(GPU_KINDS)).select(pl.len()).collect().item()
    return bool(hit)


def _labelled(ev: pl.LazyFrame, gpu: bool) -> pl.LazyFrame:
    """rank, label, start_ns, end_ns of the non-collective sources (label = priority, or
    _COMM_TRANSFER)."""
    kind, cat = pl.col("kind"), pl.col("category")
    region = kind == "region"
    data_label = (
        pl.when(cat == "data_fetch")
        .then(pl.lit(_P["data_fetch"]))
        .when(cat == "data_prep")
        .then(pl.lit(_P["data_prep"]))
        .otherwise(pl.lit(_P["data"]))
    )
    is_data = (kind == "data_wait") | (region & cat.is_in(_DATA_CATS))
    if gpu:
        kernel = kind == "kernel"
        label = (
            pl.when(kernel & ~cat.is_in(("comm", "memcpy", "sync")))
            .then(pl.lit(_P["compute"]))
            .when(kind.is_in(("memcpy", "memset")) | (kernel & (cat == "memcpy")))
            .then(pl.lit(_P["memcpy"]))
            .when(kernel & (cat == "comm"))
            .then(pl.lit(_COMM_TRANSFER))
            .when(is_data)
            .then(data_label)
        )
    else:
        label = (
            pl.when(region & (cat == "compute"))
            .then(pl.lit(_P["compute"]))
            .when(region & (cat == "memcpy"))
            .then(pl.lit(_P["memcpy"]))
            .when((kind == "bucket") | (region & (cat == "comm")))
            .then(pl.lit(_COMM_TRANSFER))
            .when(is_data)
            .then(data_label)
        )
    return (
        ev.select("rank", label.cast(pl.Int32).alias("label"), "start_ns", "end_ns")
        .filter(pl.col("label").is_not_null() & (pl.col("end_ns") > pl.col("start_ns")))
    )


def _collective_intervals(ev: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """(intervals of collectives: rank, label, start_ns, end_ns; per rank ``multi_node``)."""
    transfer = pl.when(pl.col("nnodes").fill_null(1) > 1).then(_P["network"])
    transfer = transfer.otherwise(_P["interconnect"])
    matched = match_collectives(ev).lazy()
    wait_end = pl.col("start_ns") + pl.col("sync_wait_ns")
    waits = matched.select(
        "rank", label=pl.lit(_P["sync_wait"]), start_ns="start_ns", end_ns=wait_end
    )
    rest = matched.select("rank", label=transfer, start_ns=wait_end, end_ns="end_ns")
    all_c = collectives(ev)
    # Collectives without a group cannot be matched: all of their time is transfer.
    lone = all_c.filter(pl.col("group").is_null()).select(
        "rank", label=transfer, start_ns="start_ns", end_ns="end_ns"
    )
    per_rank = all_c.group_by("rank").agg(
        multi_node=(pl.col("nnodes").fill_null(1) > 1).any()
    )
    out = pl.concat(
        [f.with_columns(pl.col("label").cast(pl.Int32)) for f in (waits, rest, lone)]
    ).filter(pl.col("end_ns") > pl.col("start_ns"))
    return out, per_rank


def _prepare(
    events: pl.DataFrame | pl.LazyFrame,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(intervals on the flat timeline sorted by start: label, start, end;
    windows: rank, step, start_ns, end_ns, step_ns, start, end (flat), offset)."""
    ev = _lazy_events(events)
    windows = step_windows(ev).select(
        pl.col("rank").cast(pl.Int32), "step", "start_ns", "end_ns", "step_ns"
    )
    if windows.height == 0:
        return pl.DataFrame(schema={"label": pl.Int32, "start": pl.Int64, "end": pl.Int64}), (
            windows.with_columns(
                start=pl.col("start_ns"), end=pl.col("end_ns"), offset=pl.col("start_ns")
            )
        )
    gpu = is_gpu_run(ev)
    bounds = flatten_offsets(
        windows.group_by("rank")
        .agg(lo=pl.col("start_ns").min(), hi=pl.col("end_ns").max())
        .sort("rank")
    )
    coll, per_rank = _collective_intervals(ev)
    base = _labelled(ev, gpu)
    comm = base.filter(pl.col("label") == _COMM_TRANSFER)
    comm = comm.join(per_rank, on="rank", how="left").select(
        "rank",
        pl.when(pl.col("multi_node").fill_null(False))  # noqa: FBT003 - a Polars literal
        .then(pl.lit(_P["network"], pl.Int32))
        .otherwise(pl.lit(_P["interconnect"], pl.Int32))
        .alias("label"),
        "start_ns",
        "end_ns",
    )
    sources = pl.concat([base.filter(pl.col("label") != _COMM_TRANSFER), comm, coll])
    b = bounds.lazy().select("rank", "lo", "hi", "offset")
    flat = (
        sources.join(b, on="rank", how="inner")
        .select(
            "label",
            start=pl.col("start_ns").clip(pl.col("lo"), pl.col("hi")) + pl.col("offset"),
            end=pl.col("end_ns").clip(pl.col("lo"), pl.col("hi")) + pl.col("offset"),
        )
        .filter(pl.col("end") > pl.col("start"))
        .sort("start")
        .collect()
    )
    w = (
        windows.join(bounds.select("rank", "offset"), on="rank")
        .with_columns(
            start=pl.col("start_ns") + pl.col("offset"), end=pl.col("end_ns") + pl.col("offset")
        )
        .sort("start")
    )
    return flat, w


def _unions(flat: pl.DataFrame) -> list[pl.LazyFrame]:
    """U_k for k = 0 .. len(ATTRIBUTED) - 1: the union of the intervals of priority <= k."""
    lf = flat.lazy()
    return [
        merge_sorted(lf.filter(pl.col("label") <= k).select("start", "end"))
        for k in range(len(ATTRIBUTED))
    ]


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


def stall_table(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank and step: rank, step, start_ns, end_ns, step_ns and the time (ns) of
    each stall category (`STALL_COLUMNS`: compute_ns, memcpy_ns, sync_wait_ns, network_ns,
    interconnect_ns, data_fetch_ns, data_prep_ns, data_ns, host_ns), which sum to step_ns.

    `events` is what stallscope.load / scan or stallscope.import_kineto returns. Steps are the
    windows of step_windows; a run without step markers gives an empty table."""
    flat, w = _prepare(events)
    if w.height == 0:
        return _empty_table()
    windows = w.lazy().select("start", "end")
    measures = pl.collect_all(
        [measure_within(u, windows).select(pl.col("measure")) for u in _unions(flat)]
    )
    cum = [m.to_series().alias(f"_u{k}") for k, m in enumerate(measures)]
    out = w.with_columns(cum)
    cols = [
        (pl.col(f"_u{k}") - (pl.col(f"_u{k - 1}") if k else 0)).alias(f"{c}_ns")
        for k, c in enumerate(ATTRIBUTED)
    ]
    last = f"_u{len(ATTRIBUTED) - 1}"
    return (
        out.with_columns(*cols, host_ns=pl.col("step_ns") - pl.col(last))
        .select("rank", "step", "start_ns", "end_ns", "step_ns", *STALL_COLUMNS)
        .sort("rank", "step")
    )


def stall_intervals(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The attributed timeline: rank, step, category (one of `STALL_CATEGORIES`), start_ns,
    end_ns, sorted by rank and start. The intervals of a rank are disjoint, cover each of its
    steps exactly and never cross a step boundary; their lengths summed per rank, step and
    category give stall_table."""
    flat, w = _prepare(events)
    schema = {
        "rank": pl.Int32(),
        "step": pl.Int64(),
        "category": pl.Enum(list(STALL_CATEGORIES)),
        "start_ns": pl.Int64(),
        "end_ns": pl.Int64(),
    }
    if w.height == 0:
        return pl.DataFrame(schema=schema)
    windows = w.lazy().select("start", "end")
    cuts = pl.concat([windows.select(t="start"), windows.select(t="end")])
    unions = _unions(flat)
    parts = []
    prev: pl.LazyFrame | None = None
    for k, u in enumerate(unions):
        seg = difference(u, prev, cuts) if prev is not None else difference(u, u.head(0), cuts)
        parts.append(seg.with_columns(category=pl.lit(ATTRIBUTED[k])))
        prev = u
    assert prev is not None
    parts.append(difference(windows, prev, cuts).with_columns(category=pl.lit("host")))
    segs = pl.concat(parts).sort("start")
    located = segs.join_asof(
        w.lazy().select(
            "rank", "step", "offset", pl.col("start").alias("_ws"), pl.col("end").alias("_we")
        ),
        left_on="start",
        right_on="_ws",
        strategy="backward",
        check_sortedness=False,
    ).filter(pl.col("start") < pl.col("_we"))
    return (
        located.select(
            "rank",
            "step",
            pl.col("category").cast(schema["category"]),
            start_ns=pl.col("start") - pl.col("offset"),
            end_ns=pl.col("end") - pl.col("offset"),
        )
        .sort("rank", "start_ns")
        .collect()
    )
