"""Chrome / Perfetto trace JSON for a whole run: load it in ui.perfetto.dev or chrome://tracing.

Layout: one process per rank (pid = rank), and in it one thread per host thread (tid = the OS
thread id), one per GPU stream (tid = `GPU_TID_BASE` + device * 1,000,000 + stream, named
"GPU d stream s"), a "stalls" track with the attributed stall intervals of stall_intervals (one
slice per interval, named by its category) and a "steps" track with one slice per step.
Collectives, p2p transfers and DDP buckets can overlap on a thread, so they are async slices
(ph b/e) with their own tracks. Instants (marks, step markers) are ph i, counters ph C.

Timestamps are µs (ns / 1000, so ns precision is kept as three decimals) from the earliest event
of the run, whose absolute ns time is kept in ``otherData.time_base_ns``; clocks are those of
the events (stallscope.load already aligns ranks onto rank 0's clock). Events with a negative
duration are left out and counted in ``otherData.skipped_events``.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Final

import orjson
import polars as pl

from stallscope._schema import conform
from stallscope._utils.gil import fair_gil

GPU_TID_BASE: Final = 100_000_000
STALLS_TID: Final = 99_000_001
STEPS_TID: Final = 99_000_000
ASYNC_KINDS: Final = ("collective", "p2p", "bucket")
_SKIP_KINDS: Final = ("clock_sync",)


def _us(ns: pl.Expr) -> pl.Expr:
    return ns.cast(pl.Float64) / 1000.0


def _encode(frame: pl.LazyFrame, fields: list[pl.Expr]) -> pl.LazyFrame:
    """One JSON object per row (column ``json``), with the fields in order."""
    length = pl.col("end_ns") - pl.col("start_ns") if "end_ns" in frame.collect_schema() else 0
    return frame.select(
        json=pl.struct(fields).struct.json_encode(), _ts="_ts", _order="_order", _len=length
    )


def _tid(device: pl.Expr, lane: pl.Expr) -> pl.Expr:
    gpu = GPU_TID_BASE + device.cast(pl.Int64) * 1_000_000 + lane.cast(pl.Int64).clip(0, 999_999)
    return pl.when(device >= 0).then(gpu).otherwise(lane.cast(pl.Int64))


@fair_gil
def perfetto_json(events: pl.DataFrame | pl.LazyFrame, *, stalls: bool = True) -> bytes:
    """The trace JSON (UTF-8) of `events` (what stallscope.load or import_kineto returns), with
    the stall tracks when `stalls`."""
    ev = conform(events).filter(~pl.col("kind").is_in(_SKIP_KINDS)).collect()
    if ev.height == 0:
        doc = {"traceEvents": [], "displayTimeUnit": "ns", "otherData": {"skipped_events": 0}}
        return orjson.dumps(doc)
    t0 = int(ev["start_ns"].min())  # type: ignore[arg-type]
    skipped = int((ev["end_ns"] < ev["start_ns"]).sum())
    lf = ev.lazy().filter(pl.col("end_ns") >= pl.col("start_ns")).with_row_index("_id")
    rel = pl.col("start_ns") - t0
    base = lf.with_columns(
        _ts=rel,
        _order=pl.lit(1),
        pid=pl.col("rank").cast(pl.Int64),
        tid=_tid(pl.col("device"), pl.col("lane")),
    )
    args = pl.struct(
        category=pl.col("category").cast(pl.String),
        correlation="correlation",
        bytes="bytes",
        detail="detail",
    )
    name = pl.col("name").fill_null("")
    cat = pl.col("kind").cast(pl.String)
    is_async = pl.col("kind").is_in(ASYNC_KINDS)
    is_counter = pl.col("kind") == "counter"
    instant = (pl.col("end_ns") == pl.col("start_ns")) & ~is_async & ~is_counter
    slices = base.filter(~is_async & ~is_counter & ~instant)
    parts = [
        _encode(
            slices,
            [
                pl.lit("X").alias("ph"),
                pl.col("pid"),
                pl.col("tid"),
                _us(pl.col("_ts")).alias("ts"),
                _us(pl.col("end_ns") - pl.col("start_ns")).alias("dur"),
                name.alias("name"),
                cat.alias("cat"),
                args.alias("args"),
            ],
        ),
        _encode(
            base.filter(instant),
            [
                pl.lit("i").alias("ph"),
                pl.col("pid"),
                pl.col("tid"),
                _us(pl.col("_ts")).alias("ts"),
                pl.lit("t").alias("s"),
                name.alias("name"),
                cat.alias("cat"),
                args.alias("args"),
            ],
        ),
        _encode(
            base.filter(is_counter),
            [
                pl.lit("C").alias("ph"),
                pl.col("pid"),
                _us(pl.col("_ts")).alias("ts"),
                name.alias("name"),
                pl.struct(value=pl.col("value").fill_null(0.0)).alias("args"),
            ],
        ),
    ]
    asyncs = base.filter(is_async)
    for ph, at in (("b", pl.col("_ts")), ("e", pl.col("end_ns") - t0)):
        parts.append(
            _encode(
                asyncs.with_columns(_ts=at, _order=pl.lit(1 if ph == "b" else 0)),
                [
                    pl.lit(ph).alias("ph"),
                    pl.col("pid"),
                    pl.col("tid"),
                    _us(pl.col("_ts")).alias("ts"),
                    pl.concat_str(pl.lit("0x"), pl.col("_id").cast(pl.String)).alias("id"),
                    name.alias("name"),
                    cat.alias("cat"),
                    args.alias("args"),
                ],
            )
        )
    if stalls:
        parts += _stall_parts(ev, t0)
    meta = _metadata(ev, stalls)
    # Sorted by time; at one time ends before begins, then longer slices first (parents before
    # their children).
    body = pl.concat(pl.collect_all(parts)).sort(
        "_ts", "_order", "_len", descending=[False, False, True], maintain_order=True
    )["json"]
    other = {"time_base_ns": t0, "skipped_events": skipped, "generator": "stallscope"}
    head = b'{"displayTimeUnit":"ns","otherData":' + orjson.dumps(other) + b',"traceEvents":[\n'
    lines = [*meta, *body.to_list()]
    return head + ",\n".join(lines).encode() + b"\n]}\n"


def _stall_parts(ev: pl.DataFrame, t0: int) -> list[pl.LazyFrame]:
    from stallscope.analysis import stall_intervals
    from stallscope.analysis._steps import step_windows

    iv = stall_intervals(ev).lazy()
    steps = step_windows(ev).lazy()
    return [
        _encode(
            frame.with_columns(_ts=pl.col("start_ns") - t0, _order=pl.lit(1)),
            [
                pl.lit("X").alias("ph"),
                pl.col("rank").cast(pl.Int64).alias("pid"),
                pl.lit(tid, pl.Int64).alias("tid"),
                _us(pl.col("_ts")).alias("ts"),
                _us(pl.col("end_ns") - pl.col("start_ns")).alias("dur"),
                label.alias("name"),
                pl.lit(cat).alias("cat"),
                pl.struct(step="step").alias("args"),
            ],
        )
        for frame, tid, label, cat in (
            (iv, STALLS_TID, pl.col("category").cast(pl.String), "stall"),
            (
                steps,
                STEPS_TID,
                pl.concat_str(pl.lit("step "), pl.col("step").cast(pl.String)),
                "step",
            ),
        )
    ]


def _metadata(ev: pl.DataFrame, stalls: bool) -> list[str]:
    """process_name / process_sort_index per rank, thread_name / thread_sort_index per track."""
    out: list[str] = []
    tracks = (
        ev.lazy()
        .filter(~pl.col("kind").is_in((*ASYNC_KINDS, "counter")))
        .select(
            pid=pl.col("rank").cast(pl.Int64),
            tid=_tid(pl.col("device"), pl.col("lane")),
            device=pl.col("device"),
            lane=pl.col("lane"),
        )
        .unique()
        .sort("pid", "tid")
        .collect()
    )
    ranks = sorted({int(r) for r in ev["rank"].unique().to_list()})
    for r in ranks:
        out.append(_meta(r, None, "process_name", {"name": f"rank {r}"}))
        out.append(_meta(r, None, "process_sort_index", {"sort_index": r}))
        if stalls:
            out.append(_meta(r, STALLS_TID, "thread_name", {"name": "stalls"}))
            out.append(_meta(r, STALLS_TID, "thread_sort_index", {"sort_index": -2}))
            out.append(_meta(r, STEPS_TID, "thread_name", {"name": "steps"}))
            out.append(_meta(r, STEPS_TID, "thread_sort_index", {"sort_index": -1}))
    for pid, tid, device, lane in tracks.iter_rows():  # one row per track, not per event
        gpu = device >= 0
        name = f"GPU {device} stream {lane}" if gpu else f"thread {lane}"
        out.append(_meta(pid, tid, "thread_name", {"name": name}))
        out.append(
            _meta(
                pid,
                tid,
                "thread_sort_index",
                {"sort_index": (1 if gpu else 0) * 10**9 + tid % 10**9},
            )
        )
    return out


def _meta(pid: int, tid: int | None, name: str, args: dict[str, object]) -> str:
    ev: dict[str, object] = {"ph": "M", "pid": pid, "name": name, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return orjson.dumps(ev).decode()


@fair_gil
def write_perfetto(
    events: pl.DataFrame | pl.LazyFrame, path: str | os.PathLike[str], *, stalls: bool = True
) -> Path:
    """Write the trace JSON of `events` to `path` (gzip-compressed when it ends in .gz, which
    ui.perfetto.dev also opens). Returns the path."""
    out = Path(path)
    data = perfetto_json(events, stalls=stalls)
    if out.suffix == ".gz":
        data = gzip.compress(data, compresslevel=6)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return out
