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
            (0, "region", "compute", 20, 30),
        ]
    )
    assert row(stall_table(ev), 0) == expect(compute=10, sync_wait=30, interconnect=10, host=50)


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
            (0, "region", "compute", 50, 150),
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
