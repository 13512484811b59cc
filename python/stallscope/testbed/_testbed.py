"""Several "machines" on one: network namespaces joined by veth pairs and a bridge, each node's link
shaped with tc tbf, and a launcher that starts R ranks per node with the rendezvous environment.

    with Testbed(nodes=2, ranks_per_node=1, rate="1gbit") as tb:
        result = tb.run([sys.executable, "train.py"], timeout_s=300)
        result.check()

Layout of run ``sstXXXXX``: namespace ``sstXXXXX-sw`` holds the bridge ``sstXXXXXbr``; node i is
namespace ``sstXXXXX-n<i>`` with interface ``sstXXXXXe<i>`` (address from 198.18.0.0/15), whose
veth peer ``sstXXXXXs<i>`` sits on the bridge. Both ends are shaped (tbf rate RATE, burst
tbf_burst_bytes(RATE, MTU), latency 200ms: node egress and node ingress); with ack_priority (the
default) the tbf's queue sends pure TCP ACKs ahead of data (see ``_net.shaping_commands``). Ranks in
one node talk over its loopback; ranks in
different nodes cross the shaped links. Nothing is created in the host's own namespace, so deleting
the run's namespaces removes every link with them.

Clean-up: on leaving the ``with`` block (normally, on an exception, on SIGINT/SIGTERM/SIGHUP while
inside it) and at interpreter exit, every process in the run's namespaces is stopped and the
namespaces deleted. A run that was SIGKILLed leaves a state file naming its owner; the next test bed
(or ``stallscope testbed --cleanup``) removes what it left, never touching a live run's.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from stallscope._utils.procs import stop_process_groups
from stallscope.testbed import _net
from stallscope.testbed._net import TestbedError

#: Seconds of traffic the token bucket may hold. A real link has no burst: after an idle period
#: tbf lets ``burst`` bytes through at veth speed, so an isolated message up to that size is not
#: shaped at all (measured here with a 256 KB burst at 50 Mbit/s: a lone 64 KiB all-reduce took
#: 0.78 ms instead of 10.5 ms). A bucket sized in *time* bounds that error to the same 2 ms at every
#: rate. It cannot be much smaller: the bucket must also cover the late wake-ups of tbf's watchdog,
#: or the link loses rate (a 0.26 ms bucket at 1 Gbit/s sustained only 94-95 % of the rate).
TBF_BURST_S = 0.002
#: Queue budget of each link (tbf ``latency``): 50 ms dropped ~550 packets per 50 Mbit/s run here,
#: 20 ms thousands (with retransmissions as slow as the stalls they were meant to remove).
TBF_LATENCY_S = 0.2
#: Real-time priority (SCHED_FIFO) given to the ranks with ``realtime=True``.
RT_PRIORITY = 50


def tbf_burst_bytes(rate_bits: float, mtu: int) -> int:
    """Token-bucket size for a link of rate_bits: TBF_BURST_S of traffic, and at least two
    full frames (MTU + 14-byte Ethernet header), the least tbf can shape with."""
    return max(math.ceil(rate_bits / 8 * TBF_BURST_S), 2 * (mtu + 14))


@dataclass(frozen=True)
class Node:
    index: int
    namespace: str
    interface: str  # inside the node's namespace (GLOO_SOCKET_IFNAME)
    peer: str  # the bridge side, in the switch namespace
    address: str


@dataclass
class RunResult:
    """Exit codes and output of one command on every rank."""

    argv: list[str]
    returncodes: list[int | None]  # negative: stopped by that signal (failure or timeout)
    outputs: list[str]  # stdout + stderr per rank (last 1 MB); "" where streamed
    timed_out: bool
    wall_s: float
    pids: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(c == 0 for c in self.returncodes)

    def check(self) -> RunResult:
        """Raise TestbedError naming the failed ranks and the tail of their output."""
        if self.ok:
            return self
        bad = [r for r, c in enumerate(self.returncodes) if c != 0]
        why = f"timed out after {self.wall_s:.0f} s" if self.timed_out else "failed"
        tails = "\n".join(
            f"--- rank {r} (exit {self.returncodes[r]}):\n{self.outputs[r][-2000:]}"
            for r in bad[:4]
        )
        raise TestbedError(f"`{' '.join(self.argv)}` {why} on rank(s) {bad}\n{tails}")


class Testbed:
    __test__ = False  # not a pytest test class

    def __init__(
        self,
        nodes: int = 2,
        ranks_per_node: int = 1,
        rate: str | Sequence[str | None] | None = "1gbit",
        subnet: str = "198.18.0.0/24",
        mtu: int = 1500,
        master_port: int = 29500,
        burst: int | None = None,
        realtime: bool = False,
        ack_priority: bool = True,
    ) -> None:
        """burst: the tbf bucket in bytes (default tbf_burst_bytes(rate, mtu)). ack_priority:
        each link's queue sends pure TCP ACKs (IPv4, no payload) ahead of queued data, as separate
        wires per direction would; without it a node's ACKs wait behind its own outgoing data in
        the shaper's queue (up to 200 ms), which inflates the peer's round-trip time until its
        receive window, not the link, limits it: all-reduce, whose data flows both ways at once,
        then ran up to 44 % slower than the link at 50 Mbit/s in some sizes (bench/README.md).
        realtime: run
        every rank under SCHED_FIFO (RT_PRIORITY), so that on a machine whose cores the ranks
        share with other work a rank woken by the network runs at once instead of waiting on the
        run queue behind other processes (the emulated machines behave as dedicated ones). The
        kernel's real-time throttling (sched_rt_runtime_us, 95 % by default) keeps the rest of
        the system alive if a rank spins; use it for communication-bound runs."""
        if not 1 <= nodes <= 64:
            raise TestbedError(f"nodes must be 1..64, got {nodes}")
        if not 1 <= ranks_per_node <= 64:
            raise TestbedError(f"ranks_per_node must be 1..64, got {ranks_per_node}")
        rates: list[str | None] = (
            [rate] * nodes if rate is None or isinstance(rate, str) else list(rate)
        )
        if len(rates) != nodes:
            raise TestbedError(f"{len(rates)} rates given for {nodes} nodes")
        self.rate_bits = [None if r is None else _net.parse_rate(r) for r in rates]
        self.rates = rates
        self.addresses, self.prefixlen = _net.node_addresses(subnet, nodes)
        self.nnodes, self.ranks_per_node = nodes, ranks_per_node
        self.mtu, self.master_port = mtu, master_port
        if burst is not None and burst < mtu + 14:
            raise TestbedError(
                f"burst {burst} bytes is smaller than one frame ({mtu + 14} bytes at MTU {mtu}): "
                "tbf could never send a full packet; raise it or leave it to the default"
            )
        self.bursts = [
            None if r is None else (burst or tbf_burst_bytes(r, mtu)) for r in self.rate_bits
        ]
        self.realtime = realtime
        self.ack_priority = ack_priority
        self.run_id = f"{_net.NAME_PREFIX}{secrets.token_hex(3)[:5]}"
        self.switch = f"{self.run_id}-sw"
        self.bridge = f"{self.run_id}br"
        self.nodes = [
            Node(i, f"{self.run_id}-n{i}", f"{self.run_id}e{i}", f"{self.run_id}s{i}", a)
            for i, a in enumerate(self.addresses)
        ]
        self._up = False
        self._state: Path | None = None
        self._old_handlers: dict[int, Any] = {}
        self._lock = threading.Lock()

    @property
    def world_size(self) -> int:
        return self.nnodes * self.ranks_per_node

    @property
    def namespaces(self) -> list[str]:
        return [self.switch] + [n.namespace for n in self.nodes]

    # ----- lifetime

    def __enter__(self) -> Testbed:
        self._install_signal_handlers()
        try:
            self.up()
        except BaseException:
            self.down()
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.down()
        finally:
            self._restore_signal_handlers()

    def up(self) -> None:
        """Create the namespaces, bridge, links, addresses and shaping. Raises TestbedError (after
        removing what it made) if any step fails."""
        _net.require_privileges()
        _net.sweep_stale()
        self._state = _net.write_state(self.run_id, self.namespaces)
        atexit.register(self.down)
        self._up = True
        sh = _net.sh
        try:
            sh(["ip", "netns", "add", self.switch])
            sh(["ip", "-n", self.switch, "link", "add", self.bridge, "type", "bridge"])
            sh(["ip", "-n", self.switch, "link", "set", self.bridge, "mtu", str(self.mtu), "up"])
            for node, rate, burst in zip(self.nodes, self.rates, self.bursts, strict=True):
                ns = node.namespace
                sh(["ip", "netns", "add", ns])
                sh(["ip", "-n", ns, "link", "set", "lo", "up"])
                sh(
                    [
                        "ip",
                        "link",
                        "add",
                        node.interface,
                        "netns",
                        ns,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        node.peer,
                        "netns",
                        self.switch,
                    ]
                )
                for where, dev in ((ns, node.interface), (self.switch, node.peer)):
                    sh(["ip", "-n", where, "link", "set", dev, "mtu", str(self.mtu)])
                sh(["ip", "-n", self.switch, "link", "set", node.peer, "master", self.bridge])
                sh(["ip", "-n", self.switch, "link", "set", node.peer, "up"])
                sh(
                    [
                        "ip",
                        "-n",
                        ns,
                        "addr",
                        "add",
                        f"{node.address}/{self.prefixlen}",
                        "dev",
                        node.interface,
                    ]
                )
                sh(["ip", "-n", ns, "link", "set", node.interface, "up"])
                if rate is not None and burst is not None:
                    for where, dev in ((ns, node.interface), (self.switch, node.peer)):
                        _net.shape_link(where, dev, rate, burst, TBF_LATENCY_S, self.ack_priority)
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Stop every process in the run's namespaces and delete them. Idempotent, bounded."""
        with self._lock:
            if not self._up:
                return
            blocked = self._block_signals()
            try:
                for ns in reversed(self.namespaces):
                    _net.delete_namespace(ns)
                left = [ns for ns in self.namespaces if ns in _net.list_namespaces()]
                if self._state is not None and not left:
                    self._state.unlink(missing_ok=True)
                self._up = False
            finally:
                self._unblock_signals(blocked)
            atexit.unregister(self.down)
            if left:
                raise TestbedError(
                    f"could not delete namespaces {left}: remove them with "
                    f"`ip netns del NAME` or `stallscope testbed --cleanup`"
                )

    # ----- signals: turn SIGTERM/SIGHUP into exceptions so the with-block's clean-up runs

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers; clean-up still runs via __exit__

        def raise_exit(signum: int, frame: FrameType | None) -> None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, raise_exit)

    def _restore_signal_handlers(self) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()

    def _block_signals(self) -> set[int | signal.Signals] | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        return signal.pthread_sigmask(
            signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        )

    def _unblock_signals(self, old: set[int | signal.Signals] | None) -> None:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    # ----- running commands

    def rank_env(self, rank: int) -> dict[str, str]:
        """The rendezvous environment of one rank (torchrun's variable names)."""
        node = self.nodes[rank // self.ranks_per_node]
        return {
            "MASTER_ADDR": self.nodes[0].address,
            "MASTER_PORT": str(self.master_port),
            "RANK": str(rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(rank % self.ranks_per_node),
            "LOCAL_WORLD_SIZE": str(self.ranks_per_node),
            "GROUP_RANK": str(node.index),
            "NODE_RANK": str(node.index),
            "GLOO_SOCKET_IFNAME": node.interface,  # else gloo binds loopback and cannot connect
            "NCCL_SOCKET_IFNAME": node.interface,
            "STALLSCOPE_TESTBED": self.run_id,
            # The node's link as shaped (tc units, "none" unshaped) and its MTU: `bench comm`
            # records them in its calibration so that a prediction can scale to other rates.
            "STALLSCOPE_TESTBED_RATE": self.rates[node.index] or "none",
            "STALLSCOPE_TESTBED_MTU": str(self.mtu),
        }

    def run(
        self,
        argv: Sequence[str],
        timeout_s: float = 600.0,
        env: Mapping[str, str] | None = None,
        stream_rank0: bool = False,
        fail_grace_s: float = 5.0,
        log_dir: str | Path | None = None,
    ) -> RunResult:
        """Run argv once per rank (in its node's namespace) and wait, at most timeout_s.

        When a rank fails, the others get fail_grace_s to finish, then are stopped; at the timeout
        all are stopped. Output is captured per rank (rank 0 goes to this process's stdout/stderr
        with stream_rank0). log_dir keeps every rank's output there as rank<N>.log."""
        if not self._up:
            raise TestbedError("the test bed is not up: use `with Testbed(...) as tb:`")
        argv = list(argv)
        if not argv:
            raise TestbedError("no command given to run on the ranks")
        procs: list[subprocess.Popen[bytes]] = []
        if log_dir is not None:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
        keep = contextlib.nullcontext(str(log_dir)) if log_dir is not None else None
        with keep or tempfile.TemporaryDirectory(prefix=f"{self.run_id}-logs-") as logdir:
            logs = []
            t0 = time.monotonic()
            try:
                for rank in range(self.world_size):
                    node = self.nodes[rank // self.ranks_per_node]
                    full_env = dict(os.environ)
                    # This interpreter's scripts (a venv's `stallscope`, `torchrun`) first on PATH.
                    bindir = os.path.dirname(sys.executable)
                    path = full_env.get("PATH", "")
                    if bindir not in path.split(os.pathsep):
                        full_env["PATH"] = os.pathsep.join([bindir, path]) if path else bindir
                    full_env.update(env or {})
                    full_env.update(self.rank_env(rank))
                    if stream_rank0 and rank == 0:
                        out: Any = None
                    else:
                        out = open(Path(logdir) / f"rank{rank}.log", "wb")  # noqa: SIM115
                        logs.append(out)
                    try:
                        procs.append(
                            subprocess.Popen(
                                ["ip", "netns", "exec", node.namespace, *argv],
                                env=full_env,
                                stdout=out,
                                stderr=subprocess.STDOUT if out is not None else None,
                                stdin=subprocess.DEVNULL,
                                start_new_session=True,  # its own process group: stopped whole
                                preexec_fn=_realtime if self.realtime else None,
                            )
                        )
                    except subprocess.SubprocessError as e:
                        raise TestbedError(
                            f"could not start rank {rank} with real-time priority ({e}): the "
                            "kernel or container refuses SCHED_FIFO; run without realtime"
                        ) from None
                timed_out = not self._wait(procs, t0 + timeout_s, fail_grace_s)
            finally:
                stop_process_groups(procs)
                for f in logs:
                    f.close()
            outputs = []
            for rank in range(self.world_size):
                p = Path(logdir) / f"rank{rank}.log"
                outputs.append(_tail(p) if p.exists() else "")
        return RunResult(
            argv,
            [p.returncode for p in procs],
            outputs,
            timed_out,
            time.monotonic() - t0,
            [p.pid for p in procs],
        )

    @staticmethod
    def _wait(procs: list[subprocess.Popen[bytes]], deadline: float, grace_s: float) -> bool:
        """Poll until all exit (True), a failure's grace ends (True) or the deadline (False)."""
        failed_at: float | None = None
        while time.monotonic() < deadline:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                return True
            if failed_at is None and any(c not in (None, 0) for c in codes):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > grace_s:
                return True
            time.sleep(0.05)
        return False

    def exec(
        self, node: int, argv: Sequence[str], timeout_s: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run one command in one node's namespace (bounded) and return its result."""
        if not self._up:
            raise TestbedError("the test bed is not up: use `with Testbed(...) as tb:`")
        try:
            return subprocess.run(
                ["ip", "netns", "exec", self.nodes[node].namespace, *argv],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TestbedError(
                f"`{' '.join(argv)}` on node {node} exceeded {timeout_s:.0f} s"
            ) from None


def _realtime() -> None:
    """In the child before exec: SCHED_FIFO, inherited by every thread the rank starts."""
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))


def _tail(path: Path, limit: int = 1 << 20) -> str:
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - limit))
        return f.read().decode(errors="replace")
