"""The test bed for real (root, iproute2): it comes up, runs an all-reduce across emulated nodes
with the right rendezvous environment, shapes the links, and leaves no namespace, link or process
behind, on success, on error, on timeout and when its launcher gets SIGINT or SIGTERM."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from stallscope.testbed import Testbed, TestbedError, _net, list_namespaces, sweep_stale

pytestmark = [pytest.mark.netns, pytest.mark.root, pytest.mark.usefixtures("netns")]
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed"
)

ALL_REDUCE = r"""
import os, datetime, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
r = dist.get_rank()
t = torch.full((1 << 16,), float(r + 1))
dist.all_reduce(t)
keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
        "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")
print("RESULT", float(t[0]), float(t[-1]), *(f"{k}={os.environ[k]}" for k in keys))
dist.destroy_process_group()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _assert_gone(tb: Testbed, pids: list[int]) -> None:
    assert not [ns for ns in list_namespaces() if ns.startswith(tb.run_id)]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert tb.run_id not in links
    assert not [p for p in pids if _alive(p)]
    assert not (_net.state_dir() / f"{tb.run_id}.json").exists()


def _parse(out: str) -> dict[str, str]:
    line = next(x for x in out.splitlines() if x.startswith("RESULT"))
    parts = line.split()
    kv = dict(p.split("=", 1) for p in parts[3:])
    kv["first"], kv["last"] = parts[1], parts[2]
    return kv


def _link_qdiscs(tb: Testbed) -> list[str]:
    """`tc qdisc show` of both ends of every node's link."""
    return [
        subprocess.run(
            ["tc", "-n", ns, "qdisc", "show", "dev", dev],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for node in tb.nodes
        for ns, dev in ((node.namespace, node.interface), (tb.switch, node.peer))
    ]


@needs_torch
@pytest.mark.parametrize(("nodes", "per_node"), [(2, 1), (2, 2)])
def test_all_reduce_across_emulated_nodes(nodes: int, per_node: int) -> None:
    with Testbed(nodes=nodes, ranks_per_node=per_node, rate="1gbit") as tb:
        for q in _link_qdiscs(tb):  # both ends of every node's link are shaped
            assert "tbf" in q, q
            assert "rate 1Gbit" in q, q
        res = tb.run([sys.executable, "-c", ALL_REDUCE], timeout_s=120)
        res.check()
    world = nodes * per_node
    expected = str(float(world * (world + 1) // 2))
    seen = [_parse(o) for o in res.outputs]
    for rank, kv in enumerate(seen):
        assert kv["first"] == kv["last"] == expected
        assert kv["RANK"] == str(rank)
        assert kv["WORLD_SIZE"] == str(world)
        assert kv["LOCAL_RANK"] == str(rank % per_node)
        assert kv["GROUP_RANK"] == kv["NODE_RANK"] == str(rank // per_node)
        assert kv["MASTER_ADDR"] == "198.18.0.1"
        assert kv["GLOO_SOCKET_IFNAME"] == tb.nodes[rank // per_node].interface
    _assert_gone(tb, res.pids)


@pytest.mark.parametrize("realtime", [True, False])
def test_ranks_run_real_time_on_request_and_links_get_the_time_sized_bucket(
    realtime: bool,
) -> None:
    probe = (
        "import os; print('POLICY', os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)"
    )
    with Testbed(nodes=2, rate="50mbit", mtu=9000, realtime=realtime) as tb:
        for q in _link_qdiscs(tb):
            burst = q.split(" burst ")[1].split()[0]  # e.g. 18028b or 17Kb (tc rounds)
            value = float(burst.rstrip("bKMit")) * (1024 if "Kb" in burst else 1)
            assert abs(value - 2 * 9014) < 200, q  # not the old 256 KB bucket
        res = tb.run([sys.executable, "-c", probe], timeout_s=60)
        res.check()
    expected = f"POLICY {os.SCHED_FIFO} 50" if realtime else f"POLICY {os.SCHED_OTHER} 0"
    for out in res.outputs:
        assert expected in out, out
    _assert_gone(tb, res.pids)


def test_cleanup_on_error_inside() -> None:
    tb = Testbed(nodes=2, rate="200mbit")
    seen: list[str] = []

    def fail_inside() -> None:
        with tb:
            seen.extend(ns for ns in tb.namespaces if ns in list_namespaces())
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert seen == tb.namespaces  # it was up
    _assert_gone(tb, [])


def test_cleanup_when_setup_fails() -> None:
    tb = Testbed(nodes=2, mtu=70000)  # beyond a veth's maximum MTU: `ip link set` fails midway
    with pytest.raises(TestbedError, match="mtu"), tb:
        pass
    _assert_gone(tb, [])


def test_timeout_stops_every_rank() -> None:
    with Testbed(nodes=2, ranks_per_node=2, rate=None) as tb:
        t0 = time.monotonic()
        res = tb.run(["sleep", "60"], timeout_s=1.0)
        assert time.monotonic() - t0 < 15
    assert res.timed_out
    assert not res.ok
    assert all(c is not None and c < 0 for c in res.returncodes)  # stopped by a signal
    with pytest.raises(TestbedError, match="timed out"):
        res.check()
    _assert_gone(tb, res.pids)


def test_a_failed_rank_stops_the_others() -> None:
    script = "import os, time, sys\nif os.environ['RANK'] == '1': sys.exit(3)\ntime.sleep(60)"
    with Testbed(nodes=2, rate=None) as tb:
        t0 = time.monotonic()
        res = tb.run([sys.executable, "-c", script], timeout_s=60, fail_grace_s=0.5)
        assert time.monotonic() - t0 < 20
    assert res.returncodes[1] == 3
    assert res.returncodes[0] != 0
    with pytest.raises(TestbedError, match=r"rank\(s\) \[0, 1\]"):
        res.check()
    _assert_gone(tb, res.pids)


def _namespaces_of(pid: int) -> list[str]:
    """The namespaces of the test bed that process `pid` launched (from its state file)."""
    for path in _net.state_dir().glob("*.json"):
        try:
            doc = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # being written or removed
        if doc.get("pid") == pid:
            return [n for n in doc.get("namespaces", []) if n in list_namespaces()]
    return []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_launcher_removes_everything(sig: signal.Signals) -> None:
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stallscope.cli.main",
            "testbed",
            "--nodes",
            "2",
            "--ranks-per-node",
            "2",
            "--",
            "sleep",
            "120",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        ours: list[str] = []
        pids: list[int] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the 4 ranks run in the new namespaces
            ours = _namespaces_of(launcher.pid)  # not another test bed's, started meanwhile
            pids = [p for n in ours for p in _net.namespace_pids(n)]
            if len(ours) == 3 and len(pids) == 4:
                break
            time.sleep(0.1)
        assert len(pids) == 4, (ours, pids)
        launcher.send_signal(sig)
        code = launcher.wait(timeout=30)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(timeout=10)
    assert code == (130 if sig == signal.SIGINT else 128 + sig), launcher.stderr.read()  # type: ignore[union-attr]
    assert not [n for n in ours if n in list_namespaces()]
    assert not [p for p in pids if _alive(p)]
    assert launcher.stderr is not None
    launcher.stderr.close()


def test_leftovers_of_a_killed_launcher_are_swept(tmp_path: Path) -> None:
    # A run whose owner died (here: a finished process) left a namespace and its state file.
    dead = subprocess.Popen(["true"])
    dead.wait(timeout=10)
    run_id = "sst" + f"{os.getpid() % 0xFFFFF:05x}"
    ns = f"{run_id}-n0"
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=20)
    state = _net.state_dir()
    state.mkdir(parents=True, exist_ok=True)
    (state / f"{run_id}.json").write_bytes(
        orjson.dumps({"pid": dead.pid, "start": "0", "namespaces": [ns]})
    )
    try:
        assert ns in sweep_stale()
        assert ns not in list_namespaces()
        assert not (state / f"{run_id}.json").exists()
        with Testbed(nodes=1, rate=None) as live:  # a live run must survive a sweep
            sweep_stale()
            assert all(n in list_namespaces() for n in live.namespaces)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20, check=False)


TCP_PAIR = r"""
import os, socket, time
port = int(os.environ["MASTER_PORT"]) + 1
if os.environ["RANK"] == "0":  # receiver: only reads, so it sends nothing but ACKs
    srv = socket.create_server((os.environ["MASTER_ADDR"], port))
    conn, _ = srv.accept()
    got = 0
    while chunk := conn.recv(1 << 16):
        got += len(chunk)
    print("RECEIVED", got)
else:  # sender: bulk data, then tiny segments that must not jump the queue
    for _ in range(200):
        try:
            s = socket.create_connection((os.environ["MASTER_ADDR"], port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"x" * (4 << 20))
    for _ in range(50):
        s.sendall(b"y")
        time.sleep(0.002)
    s.close()
"""


def _class_stats(tb: Testbed, node: int) -> dict[str, tuple[int, int]]:
    """classid -> (bytes, packets) sent by the classes on node's own interface."""
    out = subprocess.run(
        [
            "tc",
            "-n",
            tb.nodes[node].namespace,
            "-s",
            "class",
            "show",
            "dev",
            tb.nodes[node].interface,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    stats: dict[str, tuple[int, int]] = {}
    current = None  # the class whose statistics follow (the tbf's own class has none)
    for line in out.splitlines():
        if line.startswith("class "):
            current = line.split()[2]
        elif line.strip().startswith("Sent ") and current is not None:
            sent = line.split()
            stats[current] = (int(sent[1]), int(sent[3]))
            current = None
    return stats


def test_pure_acks_go_ahead_of_data_and_data_keeps_its_order() -> None:
    with Testbed(nodes=2, rate="200mbit", mtu=9000) as tb:
        for q in _link_qdiscs(tb):
            assert "qdisc tbf 1: root" in q and "rate 200Mbit" in q, q
            assert "qdisc htb 10: parent 1:1" in q, q
            assert q.count("qdisc bfifo") == 2, q
        res = tb.run([sys.executable, "-c", TCP_PAIR], timeout_s=60)
        res.check()
        receiver, sender = _class_stats(tb, 0), _class_stats(tb, 1)
    assert f"RECEIVED {(4 << 20) + 50}" in res.outputs[0]
    ack_bytes, acks = receiver["10:1"]
    assert acks > 20  # the receiver's ACKs took the priority class
    assert ack_bytes <= acks * (14 + 80)  # each a header-only frame (<= 80 IP bytes)
    data_bytes, _ = sender["10:2"]
    assert data_bytes > 4 << 20  # the data, the 1-byte segments included, stayed in the FIFO
    s_ack_bytes, s_acks = sender["10:1"]
    assert s_ack_bytes <= s_acks * (14 + 80)  # no data segment ever in the ACK class
    _assert_gone(tb, res.pids)


def test_one_fifo_per_link_without_ack_priority() -> None:
    with Testbed(nodes=2, rate="200mbit", ack_priority=False) as tb:
        for q in _link_qdiscs(tb):
            assert "qdisc tbf 1: root" in q, q
            assert "htb" not in q, q
