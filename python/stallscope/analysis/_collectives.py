"""Collectives matched across ranks.

Contract for every source of collective events (the torch.distributed instrumentation, the NCCL
profiler plugin, imported traces with NCCL metadata): kind ``collective`` or ``p2p``, category
``comm``, name = the operation (all_reduce, all_gather, ..., or NCCL's AllReduce ...),
correlation = the sequence number of the operation within its group (equal on every member
rank), bytes = the rank's payload, and detail keys:

- ``group``: an id of the group/communicator, equal on every member (e.g. NCCL's commHash or
  torch's process group name plus its ranks);
- ``group_size``: number of ranks in the group;
- ``nnodes``: number of nodes the group spans (1 = within a node: interconnect; more: network).

start_ns is when the rank entered the collective (arrived), end_ns when its transfer ended.
"""

from __future__ import annotations

import polars as pl

from stallscope._schema import parse_detail


def collectives(events: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """The collective / p2p events with their detail keys as columns: rank, name, seq, group,
    group_size, nnodes, start_ns, end_ns, bytes."""
    return (
        events.lazy()
        .filter(pl.col("kind").is_in(["collective", "p2p"]))
        .select(
            "rank",
            "name",
            pl.col("correlation").alias("seq"),
            parse_detail(pl.col("detail"), "group").alias("group"),
            parse_detail(pl.col("detail"), "group_size", pl.Int32()).alias("group_size"),
            parse_detail(pl.col("detail"), "nnodes", pl.Int32()).alias("nnodes"),
            "start_ns",
            "end_ns",
            "bytes",
            "kind",
        )
    )


def match_collectives(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank and collective instance, matched across ranks by (group, seq):
    rank, group, seq, name, start_ns, end_ns, bytes, nnodes, members (ranks seen),
    group_size, last_arrival_ns (max start over members), skew_ns (last minus first arrival),
    sync_wait_ns (this rank's time before the last member arrived, clipped to its interval),
    transfer_ns (the rest), complete (every member of the group was seen).

    Times must be on one clock (load() aligns them when the run measured offsets)."""
    c = collectives(events).filter(pl.col("group").is_not_null())
    per = pl.col("start_ns")
    grouped = c.with_columns(
        last_arrival_ns=per.max().over("group", "seq"),
        first_arrival_ns=per.min().over("group", "seq"),
        members=pl.len().over("group", "seq").cast(pl.Int32),
    )
    wait_end = pl.min_horizontal(pl.col("last_arrival_ns"), pl.col("end_ns"))
    return (
        grouped.with_columns(
            skew_ns=pl.col("last_arrival_ns") - pl.col("first_arrival_ns"),
            sync_wait_ns=(wait_end - pl.col("start_ns")).clip(lower_bound=0),
        )
        .with_columns(
            transfer_ns=(pl.col("end_ns") - pl.col("start_ns") - pl.col("sync_wait_ns")).clip(
                lower_bound=0
            ),
            complete=pl.col("group_size").is_null() | (pl.col("members") >= pl.col("group_size")),
        )
        .drop("first_arrival_ns")
        .sort("group", "seq", "rank")
        .collect()
    )
