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
from typing import Any

import numpy as np
import polars as pl

from stallscope._classify import hta_kernel_type
from stallscope._kineto._convert import TRACE_MARK
from stallscope._schema import parse_detail

NOT_HTA_KINDS = ("mark", "collective", "p2p", "counter", "clock_sync", "bucket")
GPU_KINDS = ("kernel", "memcpy", "memset", "gpu_sync")
SYNC_NAMES = ("Event Sync", "Context Sync")


def _trace_facts(events: pl.LazyFrame) -> pl.LazyFrame:
    """rank -> base_ns, ts_float (from the importer's trace mark; native runs: 0, True)."""
    return (
        events.filter((pl.col("kind") == "mark") & (pl.col("name") == TRACE_MARK))
        .select(
            "rank",
            base_ns=parse_detail(pl.col("detail"), "base_ns", pl.Int64()),
            ts_float=parse_detail(pl.col("detail"), "ts_float", pl.Int64()) == 1,
            row0_ns=parse_detail(pl.col("detail"), "row0_ns").cast(pl.Int64, strict=False),
        )
        .unique(subset="rank", keep="first")
    )


def hta_rows(
    events: pl.DataFrame | pl.LazyFrame, *, include_last_profiler_step: bool = False
) -> pl.DataFrame:
    """The rows HTA analyses: rank, kind, name, ts, dur, end (µs, float64), stream,
    correlation, is_gpu, kernel_type (HTA's), ts_runtime (aligned ts of the CPU row with the
    same correlation, null when none).

    Memoised for the last few DataFrames seen (by identity, while they live), so the views
    called one after another on one events frame share this work."""
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


_CACHE: dict[tuple[int, bool], tuple[weakref.ref[Any], pl.DataFrame]] = {}


def _hta_rows(
    events: pl.DataFrame | pl.LazyFrame, include_last_profiler_step: bool
) -> pl.DataFrame:
    lf = events.lazy()
    facts = _trace_facts(lf).collect()
    # Per-rank facts by lookup (a handful of ranks): cheaper than a join over every row.
    bases = {r: b or 0 for r, b in facts.select("rank", "base_ns").iter_rows()}
    floats = {r: f is not False for r, f in facts.select("rank", "ts_float").iter_rows()}
    rank = pl.col("rank")
    rows = lf.filter(~pl.col("kind").is_in(NOT_HTA_KINDS)).with_columns(
        base_ns=rank.replace_strict(bases, default=0, return_dtype=pl.Int64),
        ts_float=rank.replace_strict(floats, default=True, return_dtype=pl.Boolean),
    )
    kind = pl.col("kind")  # the schema's Enum: compared by code, no string per row
    stream = pl.when(kind.is_in(GPU_KINDS)).then(pl.col("lane")).otherwise(-1).cast(pl.Int64)
    corr = (
        pl.when(kind.is_in([*GPU_KINDS, "runtime"]) & (pl.col("correlation") != 0))
        .then(pl.col("correlation"))
        .otherwise(-1)
    )
    rows = rows.select(
        "rank",
        "ts_float",
        kind=kind,
        name="name",
        ns_rel=pl.col("start_ns") - pl.col("base_ns"),
        dur_ns=pl.col("end_ns") - pl.col("start_ns"),
        stream=stream,
        correlation=corr,
    ).with_columns(
        is_gpu=((pl.col("stream") >= 0) & (pl.col("correlation") >= 0))
        | pl.col("name").is_in(SYNC_NAMES),
    )
    df = _hta_times(rows.collect())
    if df.height == 0:
        return df.with_columns(
            kernel_type=pl.lit(None, pl.String), ts_runtime=pl.lit(None, pl.Float64)
        )
    shift = float(df["ts"].min())  # type: ignore[arg-type]
    df = df.with_columns(ts=pl.col("ts") - shift, end=pl.col("end") - shift)
    # index_correlation: the CPU partner of each GPU row (and vice versa) by correlation. A GPU
    # row without one gets index_correlation 0, which HTA's idle breakdown then looks up as the
    # pandas label 0: the file's first row (when HTA kept it).
    cpu_ts = (
        df.filter(~pl.col("is_gpu") & (pl.col("correlation") != -1))
        .group_by("rank", "correlation")
        .agg(ts_runtime=pl.col("ts").last())
    )
    row0 = _row0_ts(facts, shift)
    # Only GPU rows get a ts_runtime: join those alone (a fraction of the rows), then scatter.
    gpu = (
        df.select("rank", "correlation", "is_gpu")
        .with_row_index("_r")
        .filter(pl.col("is_gpu"))
        .join(cpu_ts, on=["rank", "correlation"], how="left")
        .join(row0, on="rank", how="left")
        .select(
            "_r",
            ts_runtime=pl.coalesce(
                "ts_runtime", pl.when(pl.col("correlation") >= 0).then("row0_ts")
            ),
        )
    )
    runtime = pl.repeat(None, df.height, dtype=pl.Float64, eager=True)
    if gpu.height:
        runtime = runtime.scatter(gpu["_r"], gpu["ts_runtime"])
    df = df.with_columns(runtime.alias("ts_runtime"))
    step_names = df.filter(pl.col("name").str.contains("ProfilerStep", literal=True))["name"]
    if not include_last_profiler_step and step_names.n_unique() >= 2:
        df = _drop_last_step(df)
    return df.with_columns(kind=pl.col("kind").cast(pl.String), kernel_type=_kernel_types(df))


def _kernel_types(df: pl.DataFrame) -> pl.Series:
    """HTA's kernel type of the GPU rows (stream >= 0; null elsewhere: no view reads it there),
    classified once per distinct name."""
    gpu = df["stream"] != -1
    names = df["name"].filter(gpu)
    uniq = names.unique()
    types = uniq.to_frame("n").select(hta_kernel_type(pl.col("n")).alias("t"))["t"]
    out = pl.repeat(None, df.height, dtype=pl.String, eager=True)
    if names.len():
        out = out.scatter(gpu.arg_true(), names.replace_strict(uniq, types, return_dtype=pl.String))
    return out.alias("kernel_type")


def _row0_ts(facts: pl.DataFrame, shift: float) -> pl.DataFrame:
    """rank -> HTA's aligned ts of the file's first row (null when not kept)."""
    rows = facts.filter(pl.col("row0_ns").is_not_null())
    ns_rel = (rows["row0_ns"] - rows["base_ns"]).to_numpy()
    flt = rows["ts_float"].to_numpy()
    ts = np.where(
        flt, np.ceil(ns_rel.astype(np.float64) / 1000.0), (ns_rel // 1000).astype(np.float64)
    )
    return pl.DataFrame(
        {"rank": rows["rank"], "row0_ts": pl.Series(ts - shift, dtype=pl.Float64)},
        schema={"rank": pl.Int32, "row0_ts": pl.Float64},
    )


def _hta_times(df: pl.DataFrame) -> pl.DataFrame:
    """ts / end / dur in HTA's µs. Computed with numpy: its division is IEEE-exact, while Polars
    may divide by a constant through its reciprocal, which breaks the last bit and so HTA's
    floor(ts + dur) on a few rows."""
    ns_rel = df["ns_rel"].to_numpy()
    dur_ns = df["dur_ns"].to_numpy()
    flt = df["ts_float"].to_numpy()
    # Float traces: the parsed float (ns_rel < 2**53, so this is exact to the last bit).
    # Integer traces (absolute epoch µs): the integer µs, exactly.
    rel_f = ns_rel.astype(np.float64) / 1000.0
    rel_i = (ns_rel // 1000).astype(np.float64)
    dur_f = dur_ns.astype(np.float64) / 1000.0
    ts = np.where(flt, np.ceil(rel_f), rel_i)
    end = np.where(flt, np.floor(rel_f + dur_f), rel_i + dur_f)
    return df.drop("ns_rel", "dur_ns", "ts_float").with_columns(
        ts=pl.Series(ts, dtype=pl.Float64),
        end=pl.Series(end, dtype=pl.Float64),
        dur=pl.Series(end - ts, dtype=pl.Float64),
    )


def _drop_last_step(df: pl.DataFrame) -> pl.DataFrame:
    gpu = pl.col("is_gpu")
    last = dict(
        df.filter(~gpu & pl.col("name").str.contains("ProfilerStep", literal=True))
        .group_by("rank")
        .agg(pl.col("ts").max())
        .iter_rows()
    )
    # CPU rows before their rank's last step (ranks without a step keep none: null compares false).
    limit = pl.col("rank").replace_strict(last, default=None, return_dtype=pl.Float64)
    cpu_kept = df.filter(~gpu & (pl.col("ts") < limit).fill_null(False))
    # GPU rows matching a kept CPU row by correlation, one copy per match (HTA's inner merge).
    corr = pl.col("correlation")
    matches = pl.concat(
        [  # rows without a correlation (-1) are many: counted per rank without hashing
            cpu_kept.filter(corr != -1).group_by("rank", "correlation").len("_n"),
            cpu_kept.filter(corr == -1)
            .group_by("rank")
            .len("_n")
            .select("rank", correlation=pl.lit(-1, pl.Int64), _n="_n"),
        ]
    )
    gpu_kept = df.filter(gpu).join(matches, on=["rank", "correlation"], how="inner")
    n = gpu_kept["_n"].to_numpy()
    if gpu_kept.height and n.max() > 1:
        gpu_kept = gpu_kept[np.repeat(np.arange(gpu_kept.height), n)]
    return pl.concat([gpu_kept.drop("_n"), cpu_kept])


def merge_intervals(
    rows: pl.LazyFrame | pl.DataFrame, by: str | list[str] = "rank"
) -> pl.LazyFrame:
    """HTA's merge_kernel_intervals per `by` (a column or several): sort by ts; a new interval
    starts when ts exceeds the running max of earlier ends (touching intervals merge). Columns:
    by, ts, end."""
    by = [by] if isinstance(by, str) else by
    lf = rows.lazy().sort(*by, "ts", maintain_order=True)
    prev_max = pl.col("end").shift(1).cum_max().over(by)
    return (
        lf.with_columns(_g=(pl.col("ts") > prev_max).fill_null(False).cum_sum().over(by))
        .group_by(*by, "_g")
        .agg(ts=pl.col("ts").min(), end=pl.col("end").max())
        .drop("_g")
        .sort(*by, "ts")
    )
