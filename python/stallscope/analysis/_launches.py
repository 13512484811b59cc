"""GPU work joined with the host call that launched it (CUPTI correlation ids): launch delay,
queue depth and step per kernel, memcpy and memset."""

from __future__ import annotations

import polars as pl

from stallscope._schema import parse_detail
from stallscope.analysis._steps import step_windows


def launches(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per GPU activity (kernel, memcpy, memset) joined with the runtime call that
    launched it (same rank, pid and CUPTI correlation id): rank, pid, device, lane (stream),
    kind, name, correlation, launch_start_ns, launch_end_ns, start_ns, end_ns, launch_delay_ns
    (GPU start minus launch call end), queue_depth (work items of the same stream launched and
    not finished when this one was launched, itself included; null without a launch record),
    step (pushed at launch, else the host step window holding the launch call), region."""
    ev = events.lazy()
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"])).select(
        "rank",
        "pid",
        "device",
        "lane",
        "kind",
        "name",
        "correlation",
        "start_ns",
        "end_ns",
        parse_detail(pl.col("detail"), "step", pl.Int64()).alias("step"),
        parse_detail(pl.col("detail"), "region").alias("region"),
    )
    api = ev.filter(pl.col("kind") == "runtime").select(
        "rank",
        "pid",
        "correlation",
        pl.col("start_ns").alias("launch_start_ns"),
        pl.col("end_ns").alias("launch_end_ns"),
    )
    j = (
        gpu.join(api, on=["rank", "pid", "correlation"], how="left")
        .with_columns(launch_delay_ns=pl.col("start_ns") - pl.col("launch_end_ns"))
        .collect()
    )
    # Step: the one pushed at launch (detail), else the host step window holding the launch call
    # (launches from threads that never called step(), e.g. autograd's device threads).
    w = step_windows(ev)
    if w.height:
        by_time = (
            j.with_row_index("_row")
            .with_columns(_t=pl.coalesce("launch_start_ns", "start_ns"))
            .sort("_t")
            .join_asof(
                w.select(
                    "rank",
                    pl.col("start_ns").alias("_ws"),
                    pl.col("end_ns").alias("_we"),
                    pl.col("step").alias("_ws_step"),
                ).sort("_ws"),
                left_on="_t",
                right_on="_ws",
                by="rank",
                strategy="backward",
                check_sortedness=False,
            )
            .with_columns(
                step=pl.coalesce(
                    "step", pl.when(pl.col("_t") < pl.col("_we")).then(pl.col("_ws_step"))
                )
            )
            .sort("_row")
        )
        j = by_time.select(j.columns)
    if j.height == 0:
        return j.with_columns(queue_depth=pl.lit(0, pl.Int64))
    # Queue depth at each launch: launched at or before it on the stream minus finished by then.
    keys = ["rank", "pid", "device", "lane"]
    known = j.filter(pl.col("launch_end_ns").is_not_null())
    launched = known.sort([*keys, "launch_end_ns"]).with_columns(
        _launched=pl.int_range(1, pl.len() + 1).over(keys)
    )
    ends = j.select([*keys, pl.col("end_ns").alias("_t")]).sort([*keys, "_t"])
    ends = ends.with_columns(_finished=pl.int_range(1, pl.len() + 1).over(keys))
    with_fin = launched.sort("launch_end_ns").join_asof(
        ends.sort("_t"),
        left_on="launch_end_ns",
        right_on="_t",
        by=keys,
        strategy="backward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    unknown = j.filter(pl.col("launch_end_ns").is_null()).with_columns(
        queue_depth=pl.lit(None, pl.Int64)
    )
    return pl.concat(
        [
            with_fin.with_columns(
                queue_depth=(pl.col("_launched") - pl.col("_finished").fill_null(0)).cast(pl.Int64)
            ).drop("_launched", "_t", "_finished"),
            unknown,
        ]
    ).sort("rank", "pid", "start_ns")
