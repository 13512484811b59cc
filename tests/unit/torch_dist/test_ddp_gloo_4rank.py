"""A 4-rank gloo DDP job on two emulated nodes (STALLSCOPE_NODE_ID), and a job losing a rank."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from dist_jobs import run_job  # type: ignore[import-not-found]

import stallscope
from stallscope.analysis import match_collectives

pytestmark = pytest.mark.torch


def test_four_ranks_two_nodes_matched_and_classified(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = run_job(
        4, out, "--steps", "3", "--subgroups", node_of=lambda r: "nodeA" if r < 2 else "nodeB"
    )
    for r in res:
        assert r.returncode == 0, r.stdout[-3000:]
    doc = json.loads((out / "run.json").read_text())
    topo = {p["rank"]: p["topology"] for p in doc["processes"].values()}
    assert [topo[r]["node_index"] for r in range(4)] == [0, 0, 1, 1]
    assert [topo[r]["local_rank"] for r in range(4)] == [0, 1, 2, 3]
    assert all(topo[r]["nnodes"] == 2 and topo[r]["host"] for r in range(4))
    for p in doc["processes"].values():
        offs = p["clock"]["offsets"]
        assert len(offs) == 2
        assert all(abs(s["offset_ns"]) <= s["error_ns"] for s in offs)

    ev = stallscope.load(out)
    m = match_collectives(ev)
    assert m["complete"].all()
    world = m.filter(pl.col("group_size") == 4)
    ar = world.filter(pl.col("name") == "all_reduce")
    # every DDP all-reduce on all four ranks, on a group that spans both nodes
    assert (ar["members"] == 4).all()
    assert set(ar["nnodes"]) == {2}
    assert ar.height % 4 == 0
    assert ar.height // 4 >= 3
    pairs = m.filter(pl.col("group_size") == 2)
    by_group = pairs.group_by("group").agg(
        pl.col("rank").unique().sort(), pl.col("nnodes").first(), pl.len()
    )
    kinds = {tuple(r["rank"]): r["nnodes"] for r in by_group.iter_rows(named=True)}
    assert kinds == {(0, 1): 1, (1, 2): 2}  # within node A; across nodes A and B
    assert set(by_group["len"]) == {6}  # 3 all-reduces x 2 ranks each


def test_a_rank_exiting_before_its_first_flush_is_reported_missing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # rank 1 exits at step 2 before its first flush (its flush interval is 60 s); rank 0 sees its
    # all-reduce fail, stops its trace and exits normally
    res = run_job(
        2,
        out,
        "--steps",
        "6",
        "--die-rank",
        "1",
        "--die-step",
        "2",
        "--die-how",
        "exit",
        timeout=150,
    )
    assert res[0].returncode == 0, res[0].stdout[-2000:]
    assert res[1].returncode == 3
    assert json.loads((out / "ddp-rank0.json").read_text())["failed"]
    info = stallscope.run_info(out)
    assert info.missing_ranks == [1]
    assert info.ranks == [0]
    assert any("rank 1" in p for p in info.problems)
    with pytest.warns(stallscope.StallscopeWarning) as seen:
        ev = stallscope.load(out)
    said = [str(w.message) for w in seen]
    assert any("rank 1: no event file" in m for m in said), said
    assert any("rank-00001: trace never stopped" in m for m in said), said
    assert set(ev["rank"]) == {0}
    assert ev.filter(pl.col("kind") == "bucket").height > 0
    # the survivor's stop-side clock exchange failed and says so; its start sample stays
    doc = json.loads((out / "run.json").read_text())
    r0 = next(p for p in doc["processes"].values() if p["rank"] == 0)
    assert r0["status"] == "stopped"
    assert len(r0["clock"]["offsets"]) >= 1


def test_a_killed_rank_leaves_its_flushed_events_and_the_others_loadable(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # rank 1 is SIGKILLed at step 3, after flushing parts every 50 ms
    res = run_job(
        2,
        out,
        "--steps",
        "6",
        "--die-rank",
        "1",
        "--die-step",
        "3",
        "--die-how",
        "sigkill",
        "--flush-interval",
        "0.05",
        timeout=150,
    )
    assert res[0].returncode == 0, res[0].stdout[-2000:]
    assert res[1].returncode != 0
    info = stallscope.run_info(out)
    assert info.ranks == [0, 1]
    assert any(s.startswith("rank-00001") for s in info.unfinished)
    with pytest.warns(stallscope.StallscopeWarning, match="rank-00001: trace never stopped"):
        ev = stallscope.load(out)
    assert set(ev["rank"]) == {0, 1}
    # what rank 1 recorded more than a flush interval before the kill loads (4 step markers: the
    # kill came in the 4th step), and its collectives still match rank 0's
    assert ev.filter((pl.col("rank") == 1) & (pl.col("kind") == "step")).height == 4
    m = match_collectives(ev).filter((pl.col("members") == 2) & (pl.col("rank") == 1))
    assert m.height >= 3


def test_a_rank_tracing_alone_does_not_hang_and_says_who_is_missing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = run_job(2, out, "--steps", "3", "--trace-ranks", "0", timeout=150)
    for r in res:
        assert r.returncode == 0, r.stdout[-2000:]
    doc = json.loads((out / "run.json").read_text())
    (p,) = doc["processes"].values()
    assert p["rank"] == 0
    assert any("ranks [1] did not take part" in x for x in p["clock"]["problems"])
    assert p["topology"]["node_of_rank"][0] == 0
    assert p["clock"]["offsets"][0]["offset_ns"] == 0
    info = stallscope.run_info(out)
    assert info.missing_ranks == [1]
    with pytest.warns(stallscope.StallscopeWarning, match="rank 1"):
        ev = stallscope.load(out)
    # rank 0's side of every all-reduce is there, and matching says it is incomplete
    m = match_collectives(ev)
    assert m.height >= 3
    assert not m["complete"].any()
