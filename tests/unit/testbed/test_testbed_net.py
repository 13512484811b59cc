"""Rates, addresses and the refusal without root or iproute2 (runs everywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stallscope.testbed import Testbed, TestbedError, _net, parse_rate, require_privileges
from stallscope.testbed._testbed import tbf_burst_bytes


def test_parse_rate_tc_units() -> None:
    assert parse_rate("1gbit") == 1e9
    assert parse_rate("200mbit") == 200e6
    assert parse_rate("50Mbit") == 50e6
    assert parse_rate("10mbps") == 80e6  # tc's bps units are bytes per second
    for bad in ("fast", "1 gbit", "0mbit", "10mb"):
        with pytest.raises(TestbedError, match="not a tc rate"):
            parse_rate(bad)


def test_addresses_only_from_the_benchmarking_range() -> None:
    addrs, plen = _net.node_addresses("198.18.0.0/24", 3)
    assert addrs == ["198.18.0.1", "198.18.0.2", "198.18.0.3"]
    assert plen == 24
    assert _net.node_addresses("198.19.255.0/24", 1)[0] == ["198.19.255.1"]
    for outside in ("10.0.0.0/24", "198.20.0.0/24", "198.16.0.0/14"):
        with pytest.raises(TestbedError, match=r"outside 198\.18\.0\.0/15"):
            _net.node_addresses(outside, 2)
    with pytest.raises(TestbedError, match="2 addresses"):
        _net.node_addresses("198.18.0.0/30", 3)
    with pytest.raises(TestbedError, match="not a network"):
        _net.node_addresses("198.18.0.1/24", 2)


def test_names_carry_the_run_prefix() -> None:
    tb = Testbed(nodes=3, ranks_per_node=2, rate=["1gbit", None, "50mbit"])
    assert tb.world_size == 6
    assert all(_net.NAME_RE.match(ns) for ns in tb.namespaces)
    assert all(len(n.interface) <= 15 and len(n.peer) <= 15 for n in tb.nodes)
    env = tb.rank_env(3)
    assert env["RANK"] == "3"
    assert env["LOCAL_RANK"] == "1"
    assert env["GROUP_RANK"] == "1"
    assert env["WORLD_SIZE"] == "6"
    assert env["LOCAL_WORLD_SIZE"] == "2"
    assert env["MASTER_ADDR"] == "198.18.0.1"
    assert env["GLOO_SOCKET_IFNAME"] == tb.nodes[1].interface
    with pytest.raises(TestbedError, match="2 rates given for 3 nodes"):
        Testbed(nodes=3, rate=["1gbit", "1gbit"])
    with pytest.raises(TestbedError, match="not up"):
        tb.run(["true"])


def test_refuses_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_net.shutil, "which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr(_net.os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError, match="needs root"):
        require_privileges()
    with pytest.raises(TestbedError, match="needs root"), Testbed(nodes=2):
        pass


def test_refuses_without_iproute2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_net.shutil, "which", lambda name: None)
    with pytest.raises(TestbedError, match=r"needs iproute2.*apt-get install iproute2"):
        require_privileges()


def test_tbf_bucket_is_two_ms_of_the_rate_and_at_least_two_frames() -> None:
    # The free burst after an idle period is burst / rate: the same 2 ms at every rate (a fixed
    # 256 KB bucket gave 2 ms at 1 Gbit/s but 42 ms at 50 Mbit/s).
    assert tbf_burst_bytes(1e9, 9000) == 250_000
    assert tbf_burst_bytes(200e6, 1500) == 50_000
    assert tbf_burst_bytes(50e6, 1500) == 12_500
    assert tbf_burst_bytes(50e6, 9000) == 2 * 9014  # two jumbo frames, the least tbf can shape
    tb = Testbed(nodes=3, rate=["1gbit", None, "50mbit"], mtu=1500)
    assert tb.bursts == [250_000, None, 12_500]
    assert Testbed(nodes=2, rate="1gbit", burst=100_000).bursts == [100_000, 100_000]
    with pytest.raises(TestbedError, match="smaller than one frame"):
        Testbed(nodes=2, rate="1gbit", mtu=9000, burst=4000)


def test_a_kernel_without_htb_gets_told_how_to_bring_the_bed_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ACK priority needs sch_htb / cls_u32: when tc refuses them, the error names the modules
    and the flag that brings the bed up without them (and everything made is removed)."""
    from stallscope.testbed import Testbed

    made: list[list[str]] = []

    def fake_sh(args: list[str], timeout_s: float = 0, check: bool = True) -> str:
        made.append(args)
        if "htb" in args:
            raise TestbedError(f"`{' '.join(args)}` failed: Error: Specified qdisc not found.")
        return ""

    monkeypatch.setattr(_net, "sh", fake_sh)
    monkeypatch.setattr(_net, "require_privileges", lambda: None)
    monkeypatch.setattr(_net, "sweep_stale", lambda: None)
    monkeypatch.setattr(_net, "write_state", lambda run_id, namespaces: tmp_path / "state.json")
    deleted: list[str] = []
    monkeypatch.setattr(_net, "delete_namespace", deleted.append)
    monkeypatch.setattr(_net, "list_namespaces", lambda: [])
    bed = Testbed(nodes=2, rate="50mbit")
    with pytest.raises(TestbedError, match=r"sch_htb and cls_u32.*--no-ack-priority"):
        bed.up()
    assert any("tbf" in a for a in made)  # the shaper itself went in
    assert sorted(deleted) == sorted(bed.namespaces)  # torn down after the failure
