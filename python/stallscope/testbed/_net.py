"""iproute2 plumbing for the test bed: bounded `ip` / `tc` calls, rates, addresses, the run-state
files that let a later run find what a killed one left behind."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import orjson

from stallscope.exceptions import StallscopeError

#: Every name a test bed creates starts with this, then 5 hex digits of its run id.
NAME_PREFIX = "sst"
NAME_RE = re.compile(rf"^{NAME_PREFIX}([0-9a-f]{{5}})-")
#: The benchmarking range (RFC 2544); the test bed never uses any other address.
ALLOWED_NET = ipaddress.IPv4Network("198.18.0.0/15")
CMD_TIMEOUT_S = 20.0


class TestbedError(StallscopeError):
    """The test bed could not be built, used or removed."""

    __test__ = False  # not a pytest test class


def require_privileges() -> None:
    """Refuse clearly without root or iproute2."""
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    if missing:
        raise TestbedError(
            f"the test bed needs iproute2 ({' and '.join(missing)} not found): "
            "install it (Debian/Ubuntu: apt-get install iproute2)"
        )
    if os.geteuid() != 0:
        raise TestbedError(
            "the test bed creates network namespaces and shapes links, which needs root: "
            "run it as root (e.g. sudo stallscope testbed ...)"
        )


def sh(args: list[str], timeout_s: float = CMD_TIMEOUT_S, check: bool = True) -> str:
    """Run one iproute2 command, bounded; raise TestbedError with its message on failure."""
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise TestbedError(f"`{' '.join(args)}` did not finish within {timeout_s:.0f} s") from None
    if check and p.returncode != 0:
        raise TestbedError(f"`{' '.join(args)}` failed: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$")
_RATE_MULT = {
    "bit": 1,
    "kbit": 10**3,
    "mbit": 10**6,
    "gbit": 10**9,
    "tbit": 10**12,
    # tc's "bps" units are *bytes* per second
    "bps": 8,
    "kbps": 8 * 10**3,
    "mbps": 8 * 10**6,
    "gbps": 8 * 10**9,
    "tbps": 8 * 10**12,
}


def parse_rate(rate: str) -> float:
    """tc rate string ('1gbit', '200mbit', '50mbit', '10mbps' = bytes) -> bits per second."""
    m = _RATE_RE.match(rate.strip().lower())
    if not m or float(m.group(1)) <= 0:
        raise TestbedError(
            f"rate {rate!r} is not a tc rate: use e.g. 1gbit, 200mbit, 50mbit "
            "(bit units; 'bps' units are bytes per second, as in tc)"
        )
    return float(m.group(1)) * _RATE_MULT[m.group(2)]


#: Pure TCP ACKs over IPv4 without IP options: total length = 20 + 4 x TCP data offset (no
#: payload), for every data offset (5: no options .. 15: timestamps and SACK blocks).
PURE_ACK_DOFFS = range(5, 16)


def shaping_commands(
    ns: str, dev: str, rate: str, burst: int, latency_s: float, ack_priority: bool
) -> list[list[str]]:
    """The tc commands that shape one end of a link: a tbf (rate, burst bytes, queue of latency_s)
    at the root. With ack_priority the tbf's queue is an htb that only orders, never limits
    (classes at 100 Gbit/s): class 10:1 (prio 0) takes pure TCP ACKs, class 10:2 (prio 1) the
    rest, each a byte FIFO as long as tbf's own queue would be (rate x latency + burst).

    Why: the ACKs a node sends for the data it receives leave through the same shaper as the data
    it sends. In one FIFO they wait behind that data (up to latency_s), the peer's measured RTT
    grows, its receive window (sized by the receiver from its own, short, RTT estimate) becomes
    the limit and the transfer runs below the link rate, by an amount that depends on how the two
    directions' bursts line up (measured at 50 Mbit/s: 512 KiB all-reduces 15-44 % slow in about
    a third of runs; a shorter queue instead drops packets and is no better). A data segment,
    however small, keeps its place behind earlier data: only segments without payload jump the
    queue, so TCP never sees reordering."""
    limit = math.ceil(parse_rate(rate) / 8 * latency_s) + burst  # what tbf itself would hold
    tc = ["tc", "-n", ns]
    root = [
        *tc, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "tbf",
        "rate", rate, "burst", str(burst), "latency", f"{round(latency_s * 1000)}ms",
    ]  # fmt: skip
    if not ack_priority:
        return [root]
    cmds = [
        root,
        [*tc, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "htb", "default", "2"],
    ]
    for minor, prio in ((1, 0), (2, 1)):
        cmds.append(
            [
                *tc, "class", "add", "dev", dev, "parent", "10:", "classid", f"10:{minor}",
                "htb", "rate", "100gbit", "quantum", "100000", "prio", str(prio),
            ]
        )  # fmt: skip
        cmds.append(
            [
                *tc, "qdisc", "add", "dev", dev, "parent", f"10:{minor}",
                "handle", f"1{minor}:", "bfifo", "limit", str(limit),
            ]
        )  # fmt: skip
    for doff in PURE_ACK_DOFFS:
        cmds.append(
            [
                *tc, "filter", "add", "dev", dev, "parent", "10:", "protocol", "ip", "prio", "1",
                "u32",
                "match", "ip", "protocol", "6", "0xff",
                "match", "u8", "0x05", "0x0f", "at", "0",  # IHL 5: no IP options
                "match", "u16", str(20 + 4 * doff), "0xffff", "at", "2",  # IP total length
                "match", "u8", f"{doff << 4:#04x}", "0xf0", "at", "32",  # TCP data offset
                "match", "u8", "0x10", "0x17", "at", "33",  # ACK set; FIN, SYN, RST clear
                "flowid", "10:1",
            ]
        )  # fmt: skip
    return cmds


def shape_link(
    ns: str, dev: str, rate: str, burst: int, latency_s: float, ack_priority: bool
) -> None:
    """Run shaping_commands. The tbf comes first and fails with tc's own message; the ACK
    ordering after it needs the kernel's sch_htb and cls_u32, which some kernels lack, so its
    failure also says how to do without."""
    root, *ordering = shaping_commands(ns, dev, rate, burst, latency_s, ack_priority)
    sh(root)
    for argv in ordering:
        try:
            sh(argv)
        except TestbedError as e:
            raise TestbedError(
                f"{e}. ACK priority needs the kernel's sch_htb and cls_u32 (modprobe them), or "
                "bring the bed up without it: --no-ack-priority / Testbed(ack_priority=False)"
            ) from None


def node_addresses(subnet: str, nodes: int) -> tuple[list[str], int]:
    """One address per node from subnet (inside 198.18.0.0/15), and the prefix length."""
    try:
        net = ipaddress.ip_network(subnet, strict=True)
    except ValueError as e:
        raise TestbedError(f"subnet {subnet!r} is not a network ({e})") from None
    if not isinstance(net, ipaddress.IPv4Network) or not net.subnet_of(ALLOWED_NET):
        raise TestbedError(
            f"subnet {subnet} is outside 198.18.0.0/15, the only range the test bed may use"
        )
    hosts = list(net.hosts())
    if nodes > len(hosts):
        raise TestbedError(f"subnet {subnet} has {len(hosts)} addresses; {nodes} nodes need more")
    return [str(h) for h in hosts[:nodes]], net.prefixlen


def list_namespaces() -> list[str]:
    out = sh(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(ns: str) -> list[int]:
    out = sh(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in out.split() if x.isdigit()]


def kill_namespace_processes(ns: str, grace_s: float = 3.0) -> int:
    """SIGTERM, then SIGKILL after grace_s, every process in ns (all started by the test bed).
    Returns how many were signalled."""
    pids = namespace_pids(ns)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = [p for p in namespace_pids(ns) if p in pids]
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while namespace_pids(ns) and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(pids)


def delete_namespace(ns: str) -> None:
    """Kill what runs in ns and delete it (its veth ends, and their peers, go with it)."""
    if ns not in list_namespaces():
        return
    kill_namespace_processes(ns)
    sh(["ip", "netns", "del", ns], check=False)


# ----- run-state files: a run writes one before creating anything, removes it after cleanup.


def state_dir() -> Path:
    return Path(os.environ.get("STALLSCOPE_TESTBED_STATE", "/run/stallscope-testbed"))


def _proc_start(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks


def write_state(run_id: str, namespaces: list[str]) -> Path:
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{run_id}.json"
    doc = {"pid": os.getpid(), "start": _proc_start(os.getpid()), "namespaces": namespaces}
    path.write_bytes(orjson.dumps(doc))
    return path


def _owner_alive(doc: dict[str, object]) -> bool:
    pid = doc.get("pid")
    return (
        isinstance(pid, int)
        and _proc_start(pid) is not None
        and _proc_start(pid) == doc.get("start")
    )


def sweep_stale() -> list[str]:
    """Remove what test beds whose owning process is gone left behind (a SIGKILLed launcher).

    Live runs (owner alive) are never touched. Returns the namespaces deleted."""
    removed: list[str] = []
    # List the namespaces before reading the state files: a run writes its state file before it
    # creates anything, so every namespace listed here has its file visible below (no race with
    # a run starting concurrently).
    present = list_namespaces()
    d = state_dir()
    live: set[str] = set()
    files = sorted(d.glob("*.json")) if d.is_dir() else []
    for f in files[:1000]:
        try:
            doc = orjson.loads(f.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            doc = {}
        if isinstance(doc, dict) and _owner_alive(doc):
            live.add(f.stem)
            continue
        for ns in doc.get("namespaces", []) if isinstance(doc, dict) else []:
            if ns in present:
                delete_namespace(ns)
                removed.append(ns)
        f.unlink(missing_ok=True)
    for ns in present:
        m = NAME_RE.match(ns)
        if m and f"{NAME_PREFIX}{m.group(1)}" not in live and ns not in removed:
            delete_namespace(ns)
            removed.append(ns)
    return removed
