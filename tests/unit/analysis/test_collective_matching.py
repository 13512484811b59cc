"""Matching collectives across ranks, arrival skew, sync wait vs transfer, stragglers per step."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stallscope._schema import KIND, conform
from stallscope.analysis import match_collectives, stragglers

MS = 1_000_000


def _coll(
    rank: int,
    name: str,
    seq: int,
    start: int,
    end: int,
    group: str = "g",
    size: int = 3,
    kind: str = "collective",
) -> dict[str, object]:
    return {
        "rank": rank,
        "kind": kind,
        "category": "comm",
        "name": name,
        "start_ns": start,
        "end_ns": end,
        "correlation": seq,
        "bytes": 1024,
        "detail": f"group={group};group_size={size};nnodes=1",
    }


def _step(rank: int, k: int, t: int) -> dict[str, object]:
    return {
        "rank": rank,
        "kind": "step",
        "name": "step",
        "start_ns": t,
        "end_ns": t,
        "correlation": k,
    }


def _events() -> pl.DataFrame:
    rows = []
    for r in range(3):
        rows += [_step(r, 1, 0), _step(r, 2, 100 * MS), _step(r, 3, 200 * MS)]
    # step 1: rank 2 arrives 5 ms after the others; the transfer takes 2 ms once all are there
    for seq, t in ((0, 10 * MS), (1, 30 * MS)):
        for r in range(3):
            arrive = t + (5 * MS if r == 2 else r * 100_000)
            rows.append(_coll(r, "all_reduce", seq, arrive, t + 7 * MS))
    # step 2: rank 1 is late by 3 ms
    for r in range(3):
        rows.append(_coll(r, "all_reduce", 2, 110 * MS + (3 * MS if r == 1 else 0), 115 * MS))
    return conform(pl.DataFrame(rows)).collect()


def test_skew_sync_wait_and_transfer_per_rank() -> None:
    m = match_collectives(_events())
    first = m.filter(pl.col("seq") == 0).sort("rank")
    assert first["members"].to_list() == [3, 3, 3]
    assert first["complete"].all()
    assert first["skew_ns"].to_list() == [5 * MS] * 3
    # ranks 0 and 1 waited for rank 2; every rank then transferred for 2 ms
    assert first["sync_wait_ns"].to_list() == [5 * MS, 5 * MS - 100_000, 0]
    assert first["transfer_ns"].to_list() == [2 * MS, 2 * MS, 2 * MS]


def test_stragglers_per_step() -> None:
    s = stragglers(_events())
    st1 = s.filter(pl.col("step") == 1).sort("rank")
    assert st1["straggler"].to_list() == [False, False, True]
    assert st1["last_arrivals"].to_list() == [0, 0, 2]
    assert st1["caused_wait_ns"][2] == 2 * (10 * MS - 100_000)
    st2 = s.filter(pl.col("step") == 2).sort("rank")
    assert st2["straggler"].to_list() == [False, True, False]
    assert st2["late_ns"].to_list() == [0, 3 * MS, 0]


def test_same_sequence_number_of_different_operations_is_not_merged() -> None:
    # NCCL numbers each operation type separately: AllReduce #0 and AllGather #0 coexist
    rows = [
        _coll(r, n, 0, t, t + MS, size=2)
        for r in range(2)
        for n, t in (("AllReduce", 0), ("AllGather", 50 * MS))
    ]
    m = match_collectives(conform(pl.DataFrame(rows)).collect())
    assert m["members"].to_list() == [2, 2, 2, 2]
    assert m["skew_ns"].max() == 0


def test_send_and_recv_are_one_transfer() -> None:
    rows = [
        _coll(0, "send", 0, 0, 4 * MS, group="p2p:0>1", size=2, kind="p2p"),
        _coll(1, "recv", 0, 3 * MS, 4 * MS, group="p2p:0>1", size=2, kind="p2p"),
    ]
    m = match_collectives(conform(pl.DataFrame(rows)).collect()).sort("rank")
    assert m["members"].to_list() == [2, 2]
    assert m["sync_wait_ns"].to_list() == [3 * MS, 0]  # the sender waited for the receiver


def test_details_are_parsed_per_row_whatever_repeats() -> None:
    """collectives() parses each distinct detail once: every row still gets its own keys
    (repeated, distinct, missing keys, null details), in the input's row order."""
    from stallscope.analysis import collectives

    details = [
        "group=a;group_size=2;nnodes=1",
        None,
        "group=b;group_size=4;nnodes=2",
        "group=a;group_size=2;nnodes=1",
        "nnodes=3",
        "group=a;group_size=2;nnodes=1",
    ]
    rows = [
        {
            "rank": i % 2,
            "kind": "p2p" if i == 4 else "collective",
            "category": "comm",
            "name": "all_reduce",
            "start_ns": 10 * i,
            "end_ns": 10 * i + 5,
            "correlation": i,
            "detail": d,
        }
        for i, d in enumerate(details)
    ]
    rows.insert(2, {**rows[0], "kind": "kernel", "detail": "group=zzz"})  # not a collective
    got = collectives(conform(pl.DataFrame(rows))).collect()
    assert got["seq"].to_list() == [0, 1, 2, 3, 4, 5]
    assert got["group"].to_list() == ["a", None, "b", "a", None, "a"]
    assert got["group_size"].to_list() == [2, None, 4, 2, None, 2]
    assert got["nnodes"].to_list() == [1, None, 2, 1, 3, 1]
    assert got["kind"].to_list()[4] == "p2p"


def test_instances_read_the_kind_enum_or_plain_strings_alike() -> None:
    # The stall table hands instances() schema frames (kind: the Enum, read by its codes);
    # other callers may pass kind as plain strings. p2p rows match by (group, seq) only,
    # collectives by the name too.
    from stallscope.analysis._collectives import instances

    rows = [
        _coll(0, "send", 0, 0, 4, group="p", size=2, kind="p2p"),
        _coll(1, "recv", 0, 1, 4, group="p", size=2, kind="p2p"),
        _coll(0, "all_reduce", 0, 0, 4),
        _coll(1, "all_gather", 0, 0, 4),
        _coll(2, "all_reduce", 0, 2, 4),
    ]
    enum = conform(pl.DataFrame(rows)).collect()
    plain = enum.with_columns(pl.col("kind").cast(pl.String))
    got = [instances(f).instance.tolist() for f in (enum, plain)]
    assert got[0] == got[1]
    inst = got[0]
    assert inst[0] == inst[1]  # send and recv: one transfer
    assert inst[2] == inst[4] != inst[3]  # all_gather #0 is another operation
    assert len({inst[0], inst[2], inst[3]}) == 3


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["collective", "p2p"]),
            st.sampled_from(["all_reduce", "AllReduce", None, "broadcast"]),
            st.one_of(st.none(), st.integers(0, 3)),
            st.sampled_from(
                [None, "group=a;nnodes=2", "group=b", "group=a;nnodes=1;x=1", "nnodes=3", "g=1"]
            ),
        ),
        max_size=40,
    )
)
def test_columnar_instance_keys_equal_the_row_wise_ones(rows: list[tuple[Any, ...]]) -> None:
    from stallscope.analysis import _collectives

    comm = pl.DataFrame(
        {
            "kind": [r[0] for r in rows],
            "name": [r[1] for r in rows],
            "correlation": [r[2] for r in rows],
            "detail": [r[3] for r in rows],
        },
        schema={"kind": KIND, "name": pl.String, "correlation": pl.Int64, "detail": pl.String},
    )
    small = _collectives.instances(comm)
    big = _collectives._instances_columnar(comm)
    assert small.nnodes.tolist() == big.nnodes.tolist()
    # the same partition of the rows into instances (numbered alike up to a relabelling)
    pairs = set(zip(small.instance.tolist(), big.instance.tolist(), strict=True))
    assert len({a for a, _ in pairs}) == len(pairs) == len({b for _, b in pairs})
    assert all((a < 0) == (b < 0) for a, b in pairs)
