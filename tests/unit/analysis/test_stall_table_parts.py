"""The stall table in two parts (analysis/stall/_exposed.py): each rank alone, then the sync
wait split off from the arrivals of all ranks, equals stall_table; so does the streaming table
of a run directory read a batch of ranks at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from polars.testing import assert_frame_equal
from test_stall_table_properties import event_sets, frame  # type: ignore[import-not-found]

import stallscope
from stallscope.analysis import stall_table, stream_run
from stallscope.analysis.stall._exposed import local_parts, split_sync_wait
from stallscope.io import _run_json as run_json
from stallscope.io._event_files import write_atomic
from stallscope.io._run_dir import final_path, stem_for

_ORDER = ["rank", "step", "start_ns"]


def _by_rank(ev: pl.DataFrame) -> pl.DataFrame:
    """split_sync_wait over each rank's parts computed alone (the run's GPU flag given)."""
    gpu = local_parts(ev).gpu
    parts = [local_parts(ev.filter(pl.col("rank") == r), gpu=gpu) for r in ev["rank"].unique()]
    table = pl.concat([p.table for p in parts])
    return split_sync_wait(
        table, pl.concat([p.exposed for p in parts]), pl.concat([p.arrivals for p in parts])
    )


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(event_sets())
def test_two_parts_equal_the_stall_table(rows: list[dict[str, Any]]) -> None:
    ev = frame(rows)
    full = stall_table(ev)
    lp = local_parts(ev)
    assert (lp.table["sync_wait_ns"] == 0).all()
    assert_frame_equal(split_sync_wait(lp.table, lp.exposed, lp.arrivals), full)
    if ev.height:
        got = _by_rank(ev).sort(_ORDER, nulls_last=False)
        assert_frame_equal(got, full.sort(_ORDER, nulls_last=False))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(event_sets(cpu_comm=True))
def test_two_parts_equal_the_stall_table_cpu_communication(rows: list[dict[str, Any]]) -> None:
    ev = frame(rows)
    lp = local_parts(ev)
    assert_frame_equal(split_sync_wait(lp.table, lp.exposed, lp.arrivals), stall_table(ev))


def _step(rank: int, t: int, n: int) -> dict[str, Any]:
    return {"rank": rank, "kind": "step", "category": "host", "start_ns": t, "end_ns": t,
            "correlation": n}  # fmt: skip


def _coll(rank: int, a: int, b: int, seq: int) -> dict[str, Any]:
    return {"rank": rank, "kind": "collective", "category": "comm", "start_ns": a, "end_ns": b,
            "correlation": seq, "detail": "group=g;group_size=3;nnodes=2;async=0"}  # fmt: skip


def test_exposed_communication_and_arrivals_of_a_rank() -> None:
    # rank 0: a step 0..100; compute 0..30 on a GPU stream; a collective 20..60 (seq 4) that
    # spans two nodes: exposed 30..60 as network; its arrival keeps its own start and end
    kernel = {"rank": 0, "kind": "kernel", "category": "compute", "start_ns": 0, "end_ns": 30}
    ev = frame([_step(0, 0, 1), _step(0, 100, 2), kernel, _coll(0, 20, 60, 4)])
    lp = local_parts(ev)
    assert lp.gpu and lp.multi.tolist() == [0]
    assert lp.exposed.to_dicts() == [
        {"rank": 0, "step_start_ns": 0, "start_ns": 30, "end_ns": 60, "network": True}
    ]
    a = lp.arrivals.to_dicts()
    assert len(a) == 1 and a[0]["seq"] == 4 and a[0]["group_size"] == 3
    assert (a[0]["start_ns"], a[0]["end_ns"]) == (20, 60)
    row = lp.table.to_dicts()[0]
    assert (row["compute_ns"], row["network_ns"], row["sync_wait_ns"]) == (30, 30, 0)
    # rank 1 arrives at 50: rank 0 waited 20..50, of which 30..50 was exposed
    late = frame([_step(1, 0, 1), _step(1, 100, 2), _coll(1, 50, 60, 4)])
    lp1 = local_parts(late, gpu=True)
    both = split_sync_wait(
        pl.concat([lp.table, lp1.table]),
        pl.concat([lp.exposed, lp1.exposed]),
        pl.concat([lp.arrivals, lp1.arrivals]),
    )
    r0 = both.filter(pl.col("rank") == 0).to_dicts()[0]
    assert (r0["sync_wait_ns"], r0["network_ns"]) == (20, 10)


def _write_run(ev: pl.DataFrame, out: Path, offsets: dict[int, int]) -> None:
    out.mkdir(parents=True)
    world = int(ev["rank"].max()) + 1  # type: ignore[arg-type]
    for rank in range(world):
        stem = stem_for(rank)
        write_atomic(ev.filter(pl.col("rank") == rank).to_arrow(), final_path(out, stem))
        clock = {"offsets": [{"local_ns": 0, "offset_ns": offsets.get(rank, 0)},
                             {"local_ns": 1000, "offset_ns": offsets.get(rank, 0)}]}  # fmt: skip
        entry = {"status": "stopped", "rank": rank, "world_size": world, "clock": clock}
        run_json.update_process(out, stem, entry)


def _run_events(ranks: int, gpu_from: int | None) -> pl.DataFrame:
    """Steps, regions, buckets and skewed collectives on every rank; GPU kernels on ranks
    from `gpu_from` on (None: none)."""
    rows: list[dict[str, Any]] = []
    for r in range(ranks):
        for s in range(4):
            t = 1000 * s + 7 * r
            rows += [_step(r, t, s + 1)]
            rows += [{"rank": r, "kind": "region", "category": "compute", "start_ns": t + 10,
                      "end_ns": t + 400, "lane": 1}]  # fmt: skip
            rows += [_coll(r, t + 300 + 40 * r, t + 700, s)]
            rows += [{"rank": r, "kind": "data_wait", "category": "data", "start_ns": t + 800,
                      "end_ns": t + 950}]  # fmt: skip
            if gpu_from is not None and r >= gpu_from:
                rows += [{"rank": r, "kind": "kernel", "category": "compute",
                          "start_ns": t + 100, "end_ns": t + 350}]  # fmt: skip
        rows += [_step(r, 4000 + 7 * r, 5)]
    return frame(rows)


@pytest.mark.parametrize("gpu_from", [None, 0, 3])
def test_streaming_table_of_a_run_directory_equals_the_loaded_one(
    tmp_path: Path, gpu_from: int | None
) -> None:
    ev = _run_events(5, gpu_from)
    run = tmp_path / "run"
    _write_run(ev, run, {1: 25, 3: -40})
    want = stall_table(stallscope.load(run))
    assert want["sync_wait_ns"].sum() > 0
    for batch in (1, 2, 5, 64):
        got = stream_run(run, ranks_per_batch=batch)
        assert_frame_equal(got.table, want)
        # a batch without GPU activity read before the first with some is read again
        again = 0 if gpu_from in (None, 0) else (3 // batch if batch < 5 else 0)
        assert got.batches == -(-5 // batch) + again
        s = got.sync_events
        assert set(s["kind"].unique().to_list()) == {"step", "collective"}
        loaded = stallscope.load(run)
        pick = loaded.filter(pl.col("kind").is_in(["step", "collective"]))
        assert s.height == pick.height
    assert_frame_equal(stall_table(run), want)  # a path goes through the streaming table
    matched = stallscope.analysis.match_collectives(got.sync_events)
    assert_frame_equal(matched, stallscope.analysis.match_collectives(stallscope.load(run)))
    late = stallscope.analysis.stragglers(got.sync_events, matched=matched)
    assert_frame_equal(late, stallscope.analysis.stragglers(stallscope.load(run)))
    assert late["straggler"].any()


def test_streaming_table_rejects_a_bad_batch_size(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ranks_per_batch"):
        stream_run(tmp_path, ranks_per_batch=0)


def test_streaming_table_reads_files_of_other_schemas_and_mixed_ranks(tmp_path: Path) -> None:
    ev = _run_events(4, gpu_from=0)
    run = tmp_path / "run"
    _write_run(ev, run, {1: 25})
    want = stall_table(stallscope.load(run))
    # rank 2's file as another writer leaves it: kind and category plain strings
    two = ev.filter(pl.col("rank") == 2).with_columns(pl.col("kind", "category").cast(pl.String))
    write_atomic(two.to_arrow(), final_path(run, stem_for(2)))
    assert_frame_equal(stream_run(run, ranks_per_batch=2).table, want)
    assert_frame_equal(stream_run(run, ranks_per_batch=3).table, want)
    # rank 3's rows moved into rank 0's file: its own file holds none of them
    mixed = ev.filter(pl.col("rank").is_in([0, 3]))
    write_atomic(mixed.to_arrow(), final_path(run, stem_for(0)))
    write_atomic(ev.filter(pl.col("rank") == -1).to_arrow(), final_path(run, stem_for(3)))
    want = stall_table(stallscope.load(run))
    for batch in (1, 2, 4):
        assert_frame_equal(stream_run(run, ranks_per_batch=batch).table, want)


def test_streaming_table_names_an_unreadable_file(tmp_path: Path) -> None:
    ev = _run_events(3, gpu_from=None)
    run = tmp_path / "run"
    _write_run(ev, run, {})
    final_path(run, stem_for(1)).write_bytes(b"PAR1 not really")
    with pytest.raises(stallscope.RunDirError, match=r"rank-00001\.parquet: truncated or not"):
        stream_run(run, ranks_per_batch=2)
