"""The NCCL profiler plugin driven exactly as NCCL drives it (dlopen, ncclProfiler_vN tables,
init / startEvent / recordEventState / stopEvent / finalize), inside a traced process."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest

import stallscope
from stallscope._schema import parse_detail
from stallscope.analysis import collectives
from stallscope.torch._nccl import plugin_path

sys.path.insert(0, str(Path(__file__).parent))
from nccl_abi import KERNEL_CH_STOP, PROXY_OP_IN_PROGRESS, Plugin

GPU_AHEAD_NS = 1_700_000_000_000_000_000  # a fake GPU globaltimer: host monotonic + this


def _lib() -> ctypes.CDLL:
    return ctypes.CDLL(str(plugin_path()))


def _gpu_now() -> int:
    return time.monotonic_ns() + GPU_AHEAD_NS


def _drive_comm(p: Plugin, ctx: int, rank: int, n: int, out: dict[str, list[int]]) -> None:
    """n grouped all-reduces on one communicator with 2 proxy ops and 2 kernel channels each,
    then one send and one recv, as NCCL's host thread and proxy thread would report them."""
    for seq in range(n):
        g = p.start(ctx, p.group(rank))
        c = p.start(ctx, p.coll(rank, g, seq, b"AllReduce", 1024 * (seq + 1), b"ncclFloat32"))
        assert g
        assert c
        p.stop(g)
        p.stop(c)  # enqueued: the transfer has not ended yet
        out["enqueued"].append(time.monotonic_ns())
        kids = [p.start(ctx, p.kernel_ch(rank, c, ch, _gpu_now())) for ch in range(2)]
        proxies = [p.start(ctx, p.proxy_op(rank, c, ch, (rank + 1) % 4)) for ch in range(2)]
        for h in proxies:
            p.state(h, PROXY_OP_IN_PROGRESS)
        time.sleep(0.002)
        for h in proxies:
            p.stop(h)
        ends = []
        for h in kids:
            t = _gpu_now()
            ends.append(t - GPU_AHEAD_NS)
            p.state(h, KERNEL_CH_STOP, t)
            p.stop(h)
        out["kernel_end"].append(max(ends))
    for func, peer in ((b"Send", (rank + 1) % 4), (b"Recv", (rank + 3) % 4)):
        h = p.start(ctx, p.p2p(rank, 0, func, peer, 256, b"ncclBfloat16"))
        p.stop(h)
        k = p.start(ctx, p.proxy_op(rank, h, 0, peer))
        p.stop(k)


@pytest.mark.parametrize("version", [4, 5, 6, 7])
def test_plugin_records_collectives_from_several_threads_and_comms(
    tmp_path: Path, version: int
) -> None:
    p = Plugin(_lib(), version)
    assert p.t.name == b"stallscope"
    n = 20
    outs = {h: {"enqueued": [], "kernel_end": []} for h in (0xA11, 0xB22, 0xC33)}
    with stallscope.trace(tmp_path / "run"):
        ctxs = {}
        for h in outs:
            rc, ctx, mask = p.init(f"comm{h:x}", h, 2, 4, 1)
            assert rc == 0
            assert ctx
            assert mask & 0b1000111 == 0b1000111
            ctxs[h] = ctx
        threads = [
            threading.Thread(target=_drive_comm, args=(p, ctxs[h], 1, n, outs[h])) for h in outs
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for ctx in ctxs.values():
            p.finalize(ctx)
    ev = stallscope.load(tmp_path / "run")
    coll = ev.filter(pl.col("kind") == "collective")
    assert coll.height == 3 * n
    assert set(coll["name"]) == {"AllReduce"}
    assert (coll["category"] == "comm").all()
    c = collectives(ev).collect()
    for h, out in outs.items():
        mine = c.filter((pl.col("group") == f"{h:x}") & (pl.col("kind") == "collective")).sort(
            "seq"
        )
        assert mine["seq"].to_list() == list(range(n))
        assert mine["group_size"].to_list() == [4] * n
        assert mine["nnodes"].to_list() == [2] * n
        assert mine["bytes"].to_list() == [4096 * (s + 1) for s in range(n)]
        # the end is the kernel channels' end (GPU timer mapped to the host clock), after the
        # enqueue; the mapping error is the callback latency (well under 5 ms here)
        ends = mine["end_ns"].to_numpy()
        assert (ends > pl.Series(out["enqueued"]).to_numpy()).all()
        err = abs(ends - pl.Series(out["kernel_end"]).to_numpy())
        assert err.max() < 5_000_000, err.max()
    details = coll.select(
        *(
            parse_detail(pl.col("detail"), k).alias(k)
            for k in ("algo", "proto", "nchannels", "dtype", "count", "comm", "comm_rank", "timing")
        )
    )
    assert set(details["algo"]) == {"RING"}
    assert set(details["proto"]) == {"LL"}
    assert set(details["nchannels"]) == {"2"}
    assert set(details["dtype"]) == {"ncclFloat32"}
    assert set(details["comm"]) == {"comma11", "commb22", "commc33"}
    assert set(details["comm_rank"]) == {"1"}
    assert set(details["timing"]) == {"gpu"}
    groups = ev.filter(pl.col("name") == "ncclGroup")
    assert groups.height == 3 * n
    assert set(groups["kind"]) == {"marker"}
    p2p = ev.filter(pl.col("kind") == "p2p").sort("name")
    assert p2p["name"].to_list() == ["Recv"] * 3 + ["Send"] * 3
    assert set(p2p["bytes"]) == {512}
    pg = collectives(p2p).collect()
    # rank 1 sends to 2 and receives from 0: the group names the direction, equal on both sides
    assert set(pg.filter(pl.col("name") == "Send")["group"].str.split(":").list.get(1)) == {"1>2"}
    assert set(pg.filter(pl.col("name") == "Recv")["group"].str.split(":").list.get(1)) == {"0>1"}
    assert set(pg["seq"]) == {0}


def test_plugin_outside_a_trace_hands_out_no_handles(tmp_path: Path) -> None:
    p = Plugin(_lib(), 5)
    rc, ctx, mask = p.init("idle", 0x1, 1, 2, 0)
    assert rc == 0
    assert ctx
    assert mask != 0
    assert p.start(ctx, p.group(0)) == 0
    assert p.start(ctx, p.coll(0, 0, 0, b"AllGather", 8, b"ncclInt8")) == 0
    # NCCL passes NULL handles on: every call must accept them
    p.stop(0)
    p.state(0, KERNEL_CH_STOP, 5)
    with stallscope.trace(tmp_path / "run"):
        c = p.start(ctx, p.coll(0, 0, 7, b"Broadcast", 8, b"ncclInt8"))
        assert c
        p.stop(c)  # no children: held until a flush or finalize
        kid = p.start(ctx, p.proxy_op(0, 0, 0, 1))  # a child without a parent: ignored
        assert kid == 0
        from stallscope.torch._nccl import flush_plugin

        stats = flush_plugin()
        assert stats is not None
        assert stats["recorded"] >= 1
        assert stats["communicators"] >= 1
    p.finalize(ctx)
    ev = stallscope.load(tmp_path / "run").filter(pl.col("kind") == "collective")
    assert ev["name"].to_list() == ["Broadcast"]
    assert ev["correlation"].to_list() == [7]
    assert parse_detail(ev["detail"], "timing").to_list() == ["host"]  # honest about the source


def test_finalize_writes_operations_still_open(tmp_path: Path) -> None:
    p = Plugin(_lib(), 7)
    with stallscope.trace(tmp_path / "run"):
        _, ctx, _ = p.init("f", 0x77, 1, 2, 0)
        c = p.start(ctx, p.coll(0, 0, 3, b"ReduceScatter", 64, b"ncclFloat16"))
        p.stop(c)
        k = p.start(ctx, p.proxy_op(0, c, 0, 1))
        assert k
        p.finalize(ctx)  # the communicator is destroyed before the proxy op ended
    ev = stallscope.load(tmp_path / "run").filter(pl.col("kind") == "collective")
    assert ev["name"].to_list() == ["ReduceScatter"]
    assert ev["bytes"].to_list() == [128]
    assert parse_detail(ev["detail"], "timing").to_list() == ["partial"]
    assert parse_detail(ev["detail"], "kernel_variant").to_list() == ["Generic"]


_NO_CORE = """
import ctypes, sys
sys.path.insert(0, {helper!r})
from nccl_abi import Plugin
p = Plugin(ctypes.CDLL({lib!r}), 6)
rc, ctx, mask = p.init("x", 1, 1, 1, 0)
assert rc == 0 and mask == 0, (rc, mask)   # no stallscope core in this process: no events
assert p.start(ctx, p.coll(0, 0, 0, b"AllReduce", 1, b"ncclFloat32")) == 0
p.stop(0); p.finalize(ctx)
print("ok")
"""


def test_plugin_without_a_stallscope_core_is_harmless() -> None:
    env = {k: v for k, v in os.environ.items() if k != "STALLSCOPE_CORE_LIBRARY"}
    code = _NO_CORE.format(helper=str(Path(__file__).parent), lib=str(plugin_path()))
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


_RANK = """
import ctypes, sys, time
sys.path.insert(0, {helper!r})
import stallscope
from stallscope.torch._nccl import plugin_path
from nccl_abi import KERNEL_CH_STOP, Plugin
rank = {rank}
p = Plugin(ctypes.CDLL(str(plugin_path())), 5)
with stallscope.trace({out!r}, rank=rank, world_size=2):
    _, ctx, _ = p.init("world", 0xFEED, 1, 2, rank)
    for seq in range(10):
        c = p.start(ctx, p.coll(rank, 0, seq, b"AllReduce", 4096, b"ncclFloat32"))
        p.stop(c)
        k = p.start(ctx, p.kernel_ch(rank, c, 0, time.monotonic_ns()))
        p.state(k, KERNEL_CH_STOP, time.monotonic_ns())
        p.stop(k)
    peer = 1 - rank
    h = p.start(ctx, p.p2p(rank, 0, b"Send" if rank == 0 else b"Recv", peer, 64, b"ncclInt8"))
    p.stop(h)
    k = p.start(ctx, p.proxy_op(rank, h, 0, peer))
    p.stop(k)
    p.finalize(ctx)
"""


def test_plugin_events_of_two_ranks_match_across_ranks(tmp_path: Path) -> None:
    from stallscope.analysis import match_collectives

    out = tmp_path / "run"
    for rank in (0, 1):
        code = _RANK.format(helper=str(Path(__file__).parent), rank=rank, out=str(out))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    m = match_collectives(stallscope.load(out))
    coll = m.filter(pl.col("kind") == "collective")
    assert coll.height == 20
    assert coll["complete"].all()
    assert (coll["members"] == 2).all()
    p2p = m.filter(pl.col("kind") == "p2p").sort("rank")
    assert p2p["name"].to_list() == ["Send", "Recv"]
    assert p2p["group"].to_list() == ["feed:0>1", "feed:0>1"]
    assert p2p["complete"].all()
