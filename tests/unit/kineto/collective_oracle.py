"""The collective rule written as Polars queries: the oracle `_kineto._collectives` (NumPy,
both readers) is tested against. It was the importer's rule until the NumPy one replaced it
(Polars' per-query costs outweighed a trace's few operations); ties are made explicit here
(equal operation starts: the later row takes a launch; equal (rank, start): row order)."""

from __future__ import annotations

import polars as pl

from stallscope.io.kineto._collectives import NOT_COLLECTIVES, P2P_NAMES
from stallscope.io.kineto._convert import DTYPE_BYTES


def nccl_ops(ops: pl.DataFrame) -> pl.DataFrame:
    """The rows of `ops` that are collectives: record_param_comms with a Collective name."""
    return ops.filter(
        (pl.col("name") == "record_param_comms")
        & pl.col("_coll").is_not_null()
        & ~pl.col("_coll").is_in(NOT_COLLECTIVES)
    )


def collective_events(events: pl.DataFrame, ops: pl.DataFrame | None = None) -> pl.DataFrame:
    """Collective rows for converted events of one or more ranks: the columns of `ops` (by
    default the collective rows of `events`, which then carry the private _ columns of the NCCL
    metadata), dropped of nothing; `events` supplies the kernels and runtime calls."""
    ops = nccl_ops(events if ops is None else ops).with_row_index("_op")
    if ops.height == 0:
        return ops.drop("_op").clear()
    # NCCL kernels and the runtime calls that launched them.
    kernels = events.filter((pl.col("kind") == "kernel") & (pl.col("category") == "comm")).select(
        "rank", "correlation", k_start="start_ns", k_end="end_ns"
    )
    launches = (
        events.filter(pl.col("kind") == "runtime")
        .join(kernels, on=["rank", "correlation"], how="inner")
        .select("rank", "pid", "lane", "start_ns", "k_start", "k_end")
        .sort("start_ns", maintain_order=True)
    )
    linked = (
        launches.join_asof(
            ops.select("_op", "rank", "pid", "lane", op_start="start_ns", op_end="end_ns").sort(
                "op_start", maintain_order=True
            ),
            left_on="start_ns",
            right_on="op_start",
            by=["rank", "pid", "lane"],
            strategy="backward",
            check_sortedness=False,  # sorted by start_ns above, hence within each group
        )
        .filter(pl.col("_op").is_not_null() & (pl.col("start_ns") <= pl.col("op_end")))
        .group_by("_op")
        .agg(k_start=pl.col("k_start").min(), k_end=pl.col("k_end").max())
    )
    ranks = pl.col("_pg_ranks").fill_null("").str.replace_all(r"[\[\]\s]", "")
    group = pl.concat_str(pl.col("_pg").fill_null("default"), pl.lit(":"), ranks)
    size = pl.col("_dtype").replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    name = pl.col("_coll")
    out = (
        ops.join(linked, on="_op", how="left", maintain_order="left")
        .sort("rank", "start_ns", maintain_order=True)
        .with_columns(_group=group.str.replace_all(r"[;=]", "_"))
        .with_columns(
            kind=pl.when(name.str.to_lowercase().is_in(P2P_NAMES))
            .then(pl.lit("p2p"))
            .otherwise(pl.lit("collective")),
            category=pl.lit("comm"),
            name=name,
            start_ns=pl.coalesce("k_start", "start_ns"),
            end_ns=pl.coalesce("k_end", "end_ns"),
            correlation=pl.int_range(pl.len()).over("rank", "_group").cast(pl.Int64),
            bytes=(pl.col("_in_nelems") * size).fill_null(0).clip(lower_bound=0),
            detail=pl.concat_str(
                pl.lit("group="),
                pl.col("_group"),
                pl.when(pl.col("_group_size").is_not_null())
                .then(pl.lit(";group_size=") + pl.col("_group_size").cast(pl.String))
                .otherwise(pl.lit("")),
                pl.when(pl.col("_pg_desc").is_not_null())
                .then(pl.lit(";pg_desc=") + pl.col("_pg_desc").str.replace_all(r"[;=]", "_"))
                .otherwise(pl.lit("")),
                pl.when(pl.col("_dtype").is_not_null())
                .then(pl.lit(";dtype=") + pl.col("_dtype").str.replace_all(r"[;=]", "_"))
                .otherwise(pl.lit("")),
            ),
        )
        .drop("_op", "k_start", "k_end", "_group")
    )
    return out.select([c for c in ops.columns if c != "_op"])
