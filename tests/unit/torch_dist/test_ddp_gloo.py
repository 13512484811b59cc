"""Real gloo DDP jobs on this machine, traced with stallscope.torch.instrument(model)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from dist_jobs import run_job  # type: ignore[import-not-found]

import stallscope
import stallscope.analysis
from stallscope.analysis import match_collectives, stragglers

pytestmark = pytest.mark.torch


def _ok(results: list, world: int) -> None:  # type: ignore[type-arg]
    for r in results:
        assert r.returncode == 0, r.stdout[-3000:]
    assert len(results) == world


def _clock(run: Path) -> dict[int, list[dict[str, int]]]:
    doc = json.loads((run / "run.json").read_text())
    return {p["rank"]: p["clock"]["offsets"] for p in doc["processes"].values()}


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddp2") / "run"
    _ok(run_job(2, out, "--steps", "5", "--all-ops"), 2)
    return out


def test_every_all_reduce_is_seen_on_every_rank_and_matched(two_rank_run: Path) -> None:
    ev = stallscope.load(two_rank_run)
    ar = ev.filter((pl.col("kind") == "collective") & (pl.col("name") == "all_reduce"))
    per_rank = ar.group_by("rank").agg(pl.col("correlation").sort())
    seqs = dict(zip(per_rank["rank"], per_rank["correlation"].to_list(), strict=False))
    assert set(seqs) == {0, 1}
    assert seqs[0] == seqs[1]
    # 5 steps of DDP: the first with DDP's initial bucket(s), then the rebuilt ones, plus 2 more
    assert len(seqs[0]) >= 5 + 2
    m = match_collectives(ev)
    assert m.height == ev.filter(pl.col("kind").is_in(["collective", "p2p"])).height
    assert m["complete"].all()
    assert (m["members"] == 2).all()
    # on each instance both ranks sent the same payload
    assert (m.group_by("group", "seq", "name").agg(pl.col("bytes").n_unique())["bytes"] == 1).all()


def test_bucket_sizes_equal_ddp_rebuilt_buckets(two_rank_run: Path) -> None:
    ev = stallscope.load(two_rank_run)
    for rank in (0, 1):
        ddp = json.loads((two_rank_run / f"ddp-rank{rank}.json").read_text())
        rebuilt = ddp["rebuilt_bucket_sizes"]
        assert len(rebuilt) >= 2  # bucket_cap_mb=1 splits the 1.3 MB of gradients
        b = ev.filter((pl.col("rank") == rank) & (pl.col("kind") == "bucket"))
        b = stallscope.analysis.assign_steps(b, stallscope.analysis.step_windows(ev)).collect()
        for step in range(2, 6):  # DDP rebuilds its buckets during the first step
            got = b.filter(pl.col("step") == step).sort("correlation")
            assert got["bytes"].to_list() == rebuilt, (step, got)
            assert got["correlation"].to_list() == list(range(len(rebuilt)))
            assert (got["end_ns"] > got["start_ns"]).all()
        # every bucket's all-reduce is inside its bucket event
        ar = ev.filter(
            (pl.col("rank") == rank)
            & (pl.col("kind") == "collective")
            & (pl.col("bytes").is_in(rebuilt))
        )
        assert ar.height >= 4 * len(rebuilt)


def test_each_collective_op_recorded_with_its_payload(two_rank_run: Path) -> None:
    ev = stallscope.load(two_rank_run)
    for rank in (0, 1):
        ran = json.loads((two_rank_run / f"ddp-rank{rank}.json").read_text())["ops"]
        assert {
            "all_reduce",
            "all_gather",
            "broadcast",
            "barrier",
            "send",
            "recv",
            "isend",
            "irecv",
        } <= set(ran)
        mine = ev.filter(pl.col("rank") == rank)
        for op, nbytes in ran.items():
            hit = mine.filter((pl.col("name") == op) & (pl.col("bytes") == nbytes))
            assert hit.height >= 1, (rank, op, nbytes)
            assert set(hit["category"]) == {"comm"}
    p2p = match_collectives(ev.filter(pl.col("kind") == "p2p"))
    # rank 0 -> 1 and 1 -> 0, blocking and non-blocking: each transfer has its two sides
    assert set(p2p["group"]) == {"p2p:0>1", "p2p:1>0"}
    assert (p2p["members"] == 2).all()
    assert p2p.height == 8


def test_clocks_aligned_within_the_stored_bound(two_rank_run: Path) -> None:
    clock = _clock(two_rank_run)
    assert clock[0]
    assert all(s["offset_ns"] == 0 and s["error_ns"] == 0 for s in clock[0])
    assert len(clock[1]) == 2  # at start and at stop
    for s in clock[1]:
        # both ranks read the same CLOCK_MONOTONIC: the true offset is 0, which the measurement
        # must bracket, with a bound from a real round trip
        assert abs(s["offset_ns"]) <= s["error_ns"]
        assert 0 < s["error_ns"] < 50_000_000
    err = max(s["error_ns"] for s in clock[1])
    ev = stallscope.load(two_rank_run)
    # causality on the aligned clock: nobody leaves a barrier before the last rank entered it
    bar = match_collectives(ev).filter(pl.col("name") == "barrier")
    assert bar.height == 2
    assert (bar["end_ns"] >= bar["last_arrival_ns"] - 2 * err).all()
    # the same all-reduce ends on both ranks at nearly the same time on the aligned clock
    m = match_collectives(ev).filter(pl.col("name") == "all_reduce")
    spread = m.group_by("seq").agg((pl.col("end_ns").max() - pl.col("end_ns").min()).alias("d"))
    assert spread["d"].median() < 20_000_000  # gloo completes both sides within one message
    assert stragglers(ev).height > 0


def test_alignment_moves_a_skewed_rank_onto_rank_0(two_rank_run: Path, tmp_path: Path) -> None:
    """Loading applies the offsets: shift rank 1's stored offsets and its events move by it."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(two_rank_run, run)
    doc = json.loads((run / "run.json").read_text())
    for p in doc["processes"].values():
        if p["rank"] == 1:
            for s in p["clock"]["offsets"]:
                s["offset_ns"] += 7_000_000
    (run / "run.json").write_text(json.dumps(doc))
    a = stallscope.load(two_rank_run).filter(pl.col("rank") == 1)
    b = stallscope.load(run).filter(pl.col("rank") == 1)
    assert ((b["start_ns"] - a["start_ns"]) == 7_000_000).all()
