"""The tc commands that shape a link (runs everywhere): the tbf, and with ack priority the htb
child whose u32 filters must pick out pure TCP ACKs and nothing else. The filters are evaluated
here on hand-built IPv4 headers, the way the kernel's u32 classifier reads them."""

from __future__ import annotations

import struct

from stallscope.testbed import _net

ACK, PSH, SYN, FIN, RST = 0x10, 0x08, 0x02, 0x01, 0x04


def _packet(payload: int, flags: int, tcp_opts: int = 12, ihl: int = 5, proto: int = 6) -> bytes:
    """An IPv4 header (ihl words) + TCP header (20 + tcp_opts bytes) + payload bytes."""
    doff = (20 + tcp_opts) // 4
    total = ihl * 4 + doff * 4 + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 0, 0x4000, 64, proto, 0,
                     bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2]))  # fmt: skip
    ip += b"\x01" * (ihl * 4 - 20)  # IP options (NOPs)
    tcp = struct.pack("!HHIIBBHHH", 40000, 29500, 1, 1, doff << 4, flags, 65535, 0, 0)
    return ip + tcp + b"\x01" * tcp_opts + b"x" * payload


def _u32_matches(cmd: list[str], pkt: bytes) -> bool:
    """Evaluate one `tc filter ... u32 match ...` command's matches on an IPv4 packet."""
    i, ok = 0, True
    while "match" in cmd[i:]:
        i = cmd.index("match", i) + 1
        if cmd[i] == "ip" and cmd[i + 1] == "protocol":
            value, mask, off, size = int(cmd[i + 2], 0), int(cmd[i + 3], 0), 9, 1
        else:
            size = {"u8": 1, "u16": 2, "u32": 4}[cmd[i]]
            value, mask = int(cmd[i + 1], 0), int(cmd[i + 2], 0)
            assert cmd[i + 3] == "at"
            off = int(cmd[i + 4])
        field = int.from_bytes(pkt[off : off + size], "big")
        ok = ok and (field & mask) == (value & mask)
    return ok


def _classified_as_ack(cmds: list[list[str]], pkt: bytes) -> bool:
    filters = [c for c in cmds if "filter" in c]
    assert all(c[c.index("flowid") + 1] == "10:1" for c in filters)
    return any(_u32_matches(c, pkt) for c in filters)


def test_one_fifo_without_ack_priority() -> None:
    cmds = _net.shaping_commands("ns", "dev0", "50mbit", 18028, 0.2, ack_priority=False)
    assert cmds == [
        ["tc", "-n", "ns", "qdisc", "replace", "dev", "dev0", "root", "handle", "1:", "tbf",
         "rate", "50mbit", "burst", "18028", "latency", "200ms"],
    ]  # fmt: skip


def test_ack_priority_builds_an_ordering_only_htb_under_the_tbf() -> None:
    cmds = _net.shaping_commands("ns", "dev0", "50mbit", 18028, 0.2, ack_priority=True)
    text = [" ".join(c) for c in cmds]
    assert text[0].endswith("root handle 1: tbf rate 50mbit burst 18028 latency 200ms")
    assert "qdisc add dev dev0 parent 1:1 handle 10: htb default 2" in text[1]
    classes = [t for t in text if " class add " in t]
    assert [t.split("classid ")[1].split()[0] for t in classes] == ["10:1", "10:2"]
    assert [t.split(" prio ")[1] for t in classes] == ["0", "1"]  # ACK class first
    assert all("rate 100gbit" in t for t in classes)  # orders, never limits
    # Each band holds what tbf's own queue would: 200 ms of 50 Mbit/s plus the bucket.
    fifos = [t for t in text if "bfifo" in t]
    assert len(fifos) == 2
    assert all(t.endswith(f"limit {50_000_000 // 8 // 5 + 18028}") for t in fifos)


def test_the_filters_take_pure_acks_and_nothing_else() -> None:
    cmds = _net.shaping_commands("ns", "dev0", "1gbit", 250000, 0.2, ack_priority=True)
    # Pure ACKs: no options, timestamps, timestamps + 1..3 SACK blocks (padded to words).
    for opts in (0, 12, 24, 32, 40):
        assert _classified_as_ack(cmds, _packet(0, ACK, opts)), opts
    assert _classified_as_ack(cmds, _packet(0, ACK | 0x40, 12))  # ECE does not matter
    # Everything carrying data stays in order behind earlier data, however small.
    for payload in (1, 4, 12, 28, 1000, 8948):
        assert not _classified_as_ack(cmds, _packet(payload, ACK, 12)), payload
        assert not _classified_as_ack(cmds, _packet(payload, ACK | PSH, 12)), payload
    # Connection control and other packets are not ACKs.
    for flags in (SYN, SYN | ACK, FIN | ACK, RST, RST | ACK):
        assert not _classified_as_ack(cmds, _packet(0, flags, 12)), hex(flags)
    assert not _classified_as_ack(cmds, _packet(0, ACK, 12, ihl=6))  # IP options: not matched
    assert not _classified_as_ack(cmds, _packet(0, ACK, 12, proto=17))  # not TCP
