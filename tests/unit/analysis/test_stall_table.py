"""Stall table: known answers for each category and priority rule, on hand-built events."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import stallscope
from stallscope._schema import conform
from stallscope.analysis import STALL_COLUMNS, stall_intervals, stall_table

Row = tuple[Any, ...]


def events(rows: list[Row]) -> pl.DataFrame:
    """rows: (rank, kind, category, start, end[, correlation[, detail[, lane[, device]]]])."""
    keys = ("rank", "kind", "category", "start_ns", "end_ns", "correlation", "detail", "lane")
    dicts = []
    for r in rows:
        d: dict[str, Any] = {"correlation": 0, "detail": None, "lane": 1}
        d.update(zip(keys, r, strict=False))
        d["name"] = f"{d['kind']}-{d['category']}"
        d["device"] = 0 if d["kind"] in ("kernel", "memcpy", "memset", "gpu_sync") else -1
        dicts.append(d)
    return conform(pl.DataFrame(dicts, infer_schema_length=None)).collect()


def steps(rank: int, *bounds: int) -> list[Row]:
    return [(rank, "step", "host", t, t, i) for i, t in enumerate(bounds)]


def coll(rank: int, start: int, end: int, seq: int = 0, nnodes: int = 1, group: str = "g") -> Row:
    detail = f"group={group};group_size=2;nnodes={nnodes}"
    return (rank, "collective", "comm", start, end, seq, detail)


def row(table: pl.DataFrame, rank: int = 0, step: int = 0) -> dict[str, int]:
    r = table.filter((pl.col("rank") == rank) & (pl.col("step") == step)).to_dicts()
    assert len(r) == 1
    return {k: v for k, v in r[0].items() if k.endswith("_ns") and k not in ("start_ns", "end_ns")}


def expect(**cats: int) -> dict[str, int]:
    out = {c: 0 for c in STALL_COLUMNS}
    out.update({f"{k}_ns": v for k, v in cats.items()})
    out["step_ns"] = sum(cats.values())
    return out


def test_cpu_run_compute_nested_regions_and_gaps_to_host() -> None:
    ev = events(
        [
            *steps(0, 0, 100),
            (0, "region", "compute", 10, 50),
            (0, "region", "compute", 20, 30),  # nested: counted once
            (0, "region", "host", 0, 100),  # a host region claims nothing
            (0, "region", "compute", 40, 60, 0, None, 2),  # another thread overlaps
        ]
    )
    assert row(stall_table(ev)) == expect(compute=50, host=50)


def test_cpu_run_priority_compute_over_memcpy_over_comm_over_data() -> None:
    ev = events(
        [
            *steps(0, 0, 100),
            (0, "region", "memcpy", 0, 30),
            (0, "region", "compute", 10, 20),
            (0, "bucket", "comm", 25, 50),
            (0, "data_wait", "data", 45, 70),
        ]
    )
    # memcpy 0-10, compute 10-20, memcpy 20-30, comm 30-50 (interconnect), data 50-70, host.
    assert row(stall_table(ev)) == expect(compute=10, memcpy=20, interconnect=20, data=20, host=30)


def test_gpu_run_uses_streams_not_host_regions() -> None:
    ev = events(
        [
            *steps(0, 0, 100),
            (0, "region", "compute", 0, 100),  # host-side forward: not device compute
            (0, "kernel", "compute", 10, 30, 0, None, 7),
            (0, "kernel", "compute", 20, 40, 0, None, 8),  # second stream overlaps
            (0, "memcpy", "memcpy", 35, 60, 0, None, 9),
            (0, "memset", "memcpy", 60, 65, 0, None, 9),
            (0, "kernel", "memcpy", 65, 70, 0, None, 9),  # a Memcpy-named kernel
            (0, "gpu_sync", "sync", 70, 90, 0, None, 9),  # sync does no work
            (0, "kernel", "comm", 80, 95, 0, None, 10),  # NCCL kernel, no collective info
        ]
    )
    assert row(stall_table(ev)) == expect(compute=30, memcpy=30, interconnect=15, host=25)


def test_late_rank_makes_sync_wait_on_early_rank() -> None:
    ev = events(
        [
            *steps(0, 0, 100),
            *steps(1, 0, 100),
            coll(0, 10, 60),  # rank 0 arrives at 10
            coll(1, 40, 60),  # rank 1 arrives at 40: the last member
        ]
    )
    t = stall_table(ev)
    assert row(t, 0) == expect(sync_wait=30, interconnect=20, host=50)
    assert row(t, 1) == expect(interconnect=20, host=80)


def test_multi_node_group_is_network_single_node_is_interconnect() -> None:
    ev = events(
        [
            *steps(0, 0, 100),
            coll(0, 0, 10, 0, nnodes=2, group="world"),
            coll(0, 20, 30, 0, nnodes=1, group="node"),
            (0, "bucket", "comm", 50, 60),  # rank has a multi-node group: network
        ]
    )
    assert row(stall_table(ev)) == expect(network=20, interconnect=10, host=70)


def test_collective_without_group_is_all_transfer() -> None:
    ev = events([*steps(0, 0, 100), (0, "collective", "comm", 10, 30, 0, "nnodes=4")])
    assert row(stall_table(ev)) == expect(network=20, host=80)


def test_compute_overlapping_sync_wait_wins() -> None:
    ev = events(
        [
            *steps(0, 0, 100),
            *steps(1, 0, 100),
            coll(0, 0, 50),
            coll(1, 40, 50),
            (0, "region", "compute", 20, 30, 0, None, 2),  # another thread computes meanwhile
        ]
    )
    assert row(stall_table(ev), 0) == expect(compute=10, sync_wait=30, interconnect=10, host=50)


def test_cpu_thread_blocked_in_its_synchronous_collective_is_not_computing() -> None:
    ev = events(
        [
            *steps(0, 0, 100),
            *steps(1, 0, 100),
            (0, "region", "compute", 0, 80),  # e.g. "optimizer" holding a blocking all_reduce
            coll(0, 20, 50),  # lane 1, no async key: a blocking call from that thread
            coll(1, 40, 50),
            (0, "region", "compute", 30, 35, 0, None, 2),  # another thread: still compute
        ]
    )
    # compute 0-20 and 50-80 on lane 1, 30-35 on lane 2; sync wait 20-40 minus 30-35;
    # interconnect 40-50.
    assert row(stall_table(ev), 0) == expect(compute=55, sync_wait=15, interconnect=10, host=20)


def test_cpu_async_collective_does_not_block_its_thread() -> None:
    detail = "group=g;group_size=1;nnodes=1;async=1"
    ev = events(
        [
            *steps(0, 0, 100),
            (0, "region", "compute", 0, 80),
            (0, "collective", "comm", 20, 50, 0, detail),  # isend-like: the thread goes on
        ]
    )
    assert row(stall_table(ev)) == expect(compute=80, host=20)


def bucket(rank: int, start: int, end: int, index: int, last: int | None = None) -> Row:
    detail = None if last is None else f"params=2;last={last};group_size=2"
    return (rank, "bucket", "comm", start, end, index, detail)


def async_coll(rank: int, start: int, end: int, seq: int) -> Row:
    detail = "group=pg0;group_size=2;nnodes=1;async=1"
    return (rank, "collective", "comm", start, end, seq, detail)


def test_ddp_backward_wait_for_last_bucket_is_exposed_communication() -> None:
    # backward 10-100 on the main thread; bucket 0 ready at 30 (overlapped with the rest of
    # the gradient computation), bucket 1 (the last) ready at 60: from then on backward only
    # waits for the all-reduces, which end at 90; 90-100 copies gradients back (compute).
    ev = events(
        [
            *steps(0, 0, 120),
            (0, "region", "compute", 10, 100),
            bucket(0, 30, 70, 0, last=0),
            bucket(0, 60, 90, 1, last=1),
            (0, "region", "compute", 100, 115),  # optimizer
        ]
    )
    assert row(stall_table(ev)) == expect(compute=75, interconnect=30, host=15)
    iv = stall_intervals(ev).filter(pl.col("category") == "interconnect")
    assert iv.select("start_ns", "end_ns").rows() == [(60, 90)]


def test_ddp_wait_without_last_flag_uses_latest_bucket_of_the_step() -> None:
    rows = [*steps(0, 0, 100, 200), (0, "region", "compute", 0, 80)]
    rows += [bucket(0, 20, 50, 0), bucket(0, 40, 70, 1)]  # step 0: latest ready at 40
    rows += [(0, "region", "compute", 100, 180), bucket(0, 120, 150, 0)]  # step 1: only one
    t = stall_table(ev := events(rows))
    assert row(t, 0, 0) == expect(compute=50, interconnect=30, host=20)
    assert row(t, 0, 1) == expect(compute=50, interconnect=30, host=20)
    assert stall_table(ev.lazy()).equals(t)


def test_ddp_buckets_finishing_inside_backward_compute_stay_hidden() -> None:
    # Both all-reduces end before the last bucket is ready... except the last bucket itself,
    # which ends exactly when it starts (nothing in flight): everything is compute.
    ev = events(
        [
            *steps(0, 0, 100),
            (0, "region", "compute", 0, 100),
            bucket(0, 10, 30, 0, last=0),
            bucket(0, 40, 60, 1, last=0),
            bucket(0, 90, 90, 2, last=1),
        ]
    )
    assert row(stall_table(ev)) == expect(compute=100)


def test_ddp_wait_is_split_into_sync_wait_and_transfer_across_ranks() -> None:
    # Two ranks, one bucket each (its async all_reduce recorded as a collective too). Rank 0's
    # gradients are ready at 20, rank 1's at 60 (a straggler): rank 0's backward waits 20-60
    # for rank 1 (sync wait) and 60-80 for the transfer (interconnect).
    rows = [*steps(0, 0, 100), *steps(1, 0, 100)]
    rows += [(0, "region", "compute", 0, 85), bucket(0, 20, 80, 0, last=1)]
    rows += [async_coll(0, 21, 80, 0)]
    rows += [(1, "region", "compute", 0, 85), bucket(1, 60, 80, 0, last=1)]
    rows += [async_coll(1, 61, 80, 0)]
    t = stall_table(events(rows))
    # rank 0: 20-21 only the bucket (interconnect), 21-61 sync wait, 61-80 interconnect
    assert row(t, 0) == expect(compute=25, sync_wait=40, interconnect=20, host=15)
    assert row(t, 1) == expect(compute=65, interconnect=20, host=15)
    for r in t.iter_rows(named=True):
        assert sum(r[c] for c in STALL_COLUMNS) == r["step_ns"]


def test_ddp_wait_on_multi_node_group_is_network() -> None:
    rows = [*steps(0, 0, 100), (0, "region", "compute", 0, 90), bucket(0, 50, 80, 0, last=1)]
    rows += [(0, "collective", "comm", 51, 80, 0, "group=w;group_size=1;nnodes=2;async=1")]
    assert row(stall_table(events(rows))) == expect(compute=60, network=30, host=10)


def test_gpu_run_keeps_host_waits_out_of_device_compute() -> None:
    # On a GPU run compute comes from streams only: the rule for blocked host threads does not
    # apply (the kernel keeps running while the host waits).
    ev = events(
        [
            *steps(0, 0, 100),
            (0, "kernel", "compute", 0, 90, 0, None, 7),
            (0, "region", "compute", 0, 90),
            bucket(0, 50, 80, 0, last=1),
        ]
    )
    assert row(stall_table(ev)) == expect(compute=90, host=10)


def test_data_wait_split_into_fetch_and_prep() -> None:
    ev = events(
        [
            *steps(0, 0, 100),
            (0, "data_wait", "data", 0, 40),  # the main thread waits 0-40
            (0, "region", "data_fetch", 0, 15, 0, None, 5),  # the loader reports fetch ...
            (0, "region", "data_prep", 10, 30, 0, None, 5),  # ... then prep (fetch wins 10-15)
            (0, "region", "compute", 35, 60),
        ]
    )
    assert row(stall_table(ev)) == expect(data_fetch=15, data_prep=15, data=5, compute=25, host=40)


def test_intervals_crossing_step_boundaries_are_split() -> None:
    ev = events(
        [
            *steps(0, 0, 100, 200, 300),
            (0, "region", "compute", 50, 250),
            (0, "region", "compute", 280, 400),  # beyond the last step: clipped
            (0, "region", "compute", -50, 10),  # before the first step: clipped
        ]
    )
    t = stall_table(ev)
    assert t.height == 3
    assert row(t, 0, 0) == expect(compute=60, host=40)
    assert row(t, 0, 1) == expect(compute=100)
    assert row(t, 0, 2) == expect(compute=70, host=30)


def test_ranks_are_independent_and_ordered() -> None:
    ev = events(
        [
            *steps(1, 1000, 1100),
            *steps(0, 0, 50, 100),
            (1, "region", "compute", 1000, 1010),
            (0, "region", "compute", 60, 100),
        ]
    )
    t = stall_table(ev)
    assert t.select("rank", "step").rows() == [(0, 0), (0, 1), (1, 0)]
    assert row(t, 0, 0) == expect(host=50)
    assert row(t, 0, 1) == expect(compute=40, host=10)
    assert row(t, 1, 0) == expect(compute=10, host=90)


def test_imported_profiler_step_ranges_with_gaps() -> None:
    ev = events(
        [
            (0, "step", "host", 0, 100, 7),  # ProfilerStep#7 ends before the next starts
            (0, "step", "host", 150, 250, 8),
            (0, "kernel", "compute", 90, 160, 0, None, 7),
        ]
    )
    t = stall_table(ev)
    assert t["step"].to_list() == [7, 8]
    assert row(t, 0, 7) == expect(compute=10, host=90)
    assert row(t, 0, 8) == expect(compute=10, host=90)


def test_no_steps_gives_empty_table_with_columns() -> None:
    t = stall_table(events([(0, "region", "compute", 0, 10)]))
    assert t.height == 0
    assert set(STALL_COLUMNS) <= set(t.columns)


def test_lazy_input_and_top_level_export() -> None:
    ev = events([*steps(0, 0, 10), (0, "region", "compute", 0, 5)])
    assert stallscope.stall_table(ev.lazy()).equals(stall_table(ev))


def test_stall_intervals_cover_steps_and_sum_to_table() -> None:
    ev = events(
        [
            *steps(0, 0, 100, 200),
            *steps(1, 0, 100),
            coll(0, 10, 60),
            coll(1, 40, 60),
            (0, "region", "compute", 50, 150, 0, None, 2),  # not the collective's thread
            (0, "data_wait", "data_prep", 150, 170),
        ]
    )
    iv = stall_intervals(ev)
    for _, g in iv.group_by("rank", "step"):
        g = g.sort("start_ns")
        ends, starts = g["end_ns"].to_list(), g["start_ns"].to_list()
        assert ends[:-1] == starts[1:], "disjoint and gap-free within a step"
    sums = (
        iv.group_by("rank", "step", "category")
        .agg(ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
        .with_columns(pl.col("category").cast(pl.String) + "_ns")
        .pivot("category", index=["rank", "step"], values="ns")
    )
    t = stall_table(ev)
    for r in t.iter_rows(named=True):
        s = sums.filter((pl.col("rank") == r["rank"]) & (pl.col("step") == r["step"])).to_dicts()[0]
        for c in STALL_COLUMNS:
            assert (s.get(c) or 0) == r[c], c
    assert row(t, 0, 0) == expect(sync_wait=30, interconnect=10, compute=50, host=10)
    assert row(t, 0, 1) == expect(compute=50, data_prep=20, host=30)


def test_bad_input_names_missing_column() -> None:
    with pytest.raises(ValueError, match="start_ns"):
        stall_table(pl.DataFrame({"kind": ["step"], "name": ["s"], "end_ns": [0]}))


@pytest.mark.parametrize("lazy", [False, True])
def test_collectives_matched_by_operation_too(lazy: bool) -> None:
    # NCCL numbers collectives per operation: AllReduce #0 and AllGather #0 are different
    # instances; a lazy source (scan) must keep the names the matching needs.
    rows = [*steps(0, 0, 100), *steps(1, 0, 100)]
    rows += [coll(0, 10, 40), coll(1, 30, 40)]  # AllReduce #0: rank 1 arrives last
    rows += [coll(0, 50, 70), coll(1, 50, 70)]  # AllGather #0: both at 50
    ev = events(rows).with_columns(
        name=pl.when(pl.col("kind") == "collective")
        .then(
            pl.when(pl.col("start_ns") < 50)
            .then(pl.lit("AllReduce"))
            .otherwise(pl.lit("AllGather"))
        )
        .otherwise(pl.col("name"))
    )
    t = stall_table(ev.lazy() if lazy else ev)
    assert row(t, 0) == expect(sync_wait=20, interconnect=30, host=50)
    assert row(t, 1) == expect(interconnect=30, host=70)


def test_frame_without_schema_dtypes_gives_the_same_table() -> None:
    # A hand-made frame (kind and category as strings, Int64 ranks, no lane or detail) is
    # conformed first: same table as the schema frame.
    ev = events(
        [*steps(0, 0, 100), (0, "kernel", "compute", 10, 30), (0, "memcpy", "memcpy", 20, 60)]
    )
    raw = ev.select(
        pl.col("rank").cast(pl.Int64),
        pl.col("kind").cast(pl.String),
        pl.col("category").cast(pl.String),
        "name",
        "start_ns",
        "end_ns",
        "correlation",
    )
    assert stall_table(raw).equals(stall_table(ev))
    assert row(stall_table(raw)) == expect(compute=20, memcpy=30, host=50)


def test_nulls_claim_nothing_and_a_step_without_number_stays() -> None:
    # A null category claims no time; a row without a start or a rank lies in no step; a step
    # marker without a correlation still opens its window (step null, sorted first).
    ev = events(
        [
            *steps(0, 0, 100),
            (0, "step", "host", 100, 100, 5),
            (0, "kernel", "compute", 10, 20),
            (0, "data_wait", "data", 30, 50),
            (0, "kernel", "compute", 60, 70),
            (0, "kernel", "compute", 110, 130),
            (0, "step", "host", 200, 200, 6),
        ]
    )
    ev = ev.with_columns(
        category=pl.when(pl.col("start_ns") == 30).then(None).otherwise(pl.col("category")),
        start_ns=pl.when(pl.col("start_ns") == 60).then(None).otherwise(pl.col("start_ns")),
        correlation=pl.when(pl.col("correlation") == 5).then(None).otherwise(pl.col("correlation")),
    )
    t = stall_table(ev)
    assert t["step"].to_list() == [None, 0, 1]
    assert row(t, 0, 0) == expect(compute=10, host=90)
    w = stallscope.analysis.step_windows(ev)
    assert w["step"].to_list() == [0, 1, None]  # by rank and start
    assert w["step_ns"].to_list() == [100, 0, 100]
    nulls = t.filter(pl.col("step").is_null()).to_dicts()[0]
    assert nulls["compute_ns"] == 20 and nulls["host_ns"] == 80


def test_step_windows_skip_markers_without_rank_or_start_eager_and_lazy() -> None:
    # Without the drop, the marker at 300 would open a last window and the one at 50 split
    # rank 1's window.
    ev = events([*steps(0, 0, 100, 200), *steps(1, 0, 50, 80), (0, "step", "host", 300, 300, 9)])
    ev = ev.with_columns(
        start_ns=pl.when(pl.col("start_ns") == 300).then(None).otherwise(pl.col("start_ns")),
        rank=pl.when((pl.col("rank") == 1) & (pl.col("start_ns") == 50))
        .then(None)
        .otherwise(pl.col("rank")),
    )
    eager = stallscope.analysis.step_windows(ev)
    assert eager.equals(stallscope.analysis.step_windows(ev.lazy()))
    assert eager.select("rank", "start_ns", "end_ns").rows() == [
        (0, 0, 100),
        (0, 100, 200),
        (1, 0, 80),
    ]
