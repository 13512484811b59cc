"""Per-operation diagnosis of all-reduce on the test bed (the evidence behind the validation's
method: docs/performance-notes.md, "Test bed").

On 2 emulated nodes x 1 rank at one rate: for each size, time every all-reduce of a back-to-back
loop ("loop", as `stallscope bench comm` does) or of operations each preceded by 30 ms of idle
("isolated": what a token bucket does to a message after a pause), and print the distribution
against the link time (size x 8 / rate), the ranks' run-queue wait per operation (schedstat), the
kernel's ksoftirqd run-queue wait over the run, the qdiscs' drops and the TCP counters of both
nodes' namespaces (tail-loss probes, retransmissions, DSACKs: spurious retransmissions, receive
window limits), per sweep with --sweeps N. Compare --realtime (ranks under SCHED_FIFO) with normal priority, --burst sizes,
and --no-ack-priority (one FIFO per link) with the default, in one loaded or quiet window.

    python bench/comm_testbed_probe.py --rate 1gbit [--realtime] [--mode isolated] [--burst 262144]

Needs root and iproute2; run it under `flock /tmp/stallscope-bench.lock` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics as st
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _rank(out: str, sizes: list[int], seconds: float, mode: str) -> None:
    """One rank: time every operation of each size; rank 0 writes {size: [ns, ...]}."""
    import torch
    import torch.distributed as dist

    from stallscope.comm._harness import runqueue_wait_ns

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    res: dict[str, Any] = {}
    for n in sizes:
        buf = torch.ones(n // 4)
        warm = max(3, (2 << 20) // n)  # >= 2 MiB: empties the token bucket
        t0 = time.perf_counter()
        for _ in range(warm):
            dist.all_reduce(buf)
        per_op = (time.perf_counter() - t0) / warm
        iters = torch.tensor([max(5, int(seconds / per_op))])
        dist.broadcast(iters, 0)  # rank 0 decides: ranks must agree on the count
        dist.barrier()
        w0, ts = runqueue_wait_ns() or 0, []
        if mode == "isolated":
            for _ in range(min(40, int(iters.item()))):
                dist.barrier()
                time.sleep(0.03)  # the link idles: a token bucket refills
                t = time.perf_counter_ns()
                dist.all_reduce(buf)
                ts.append(time.perf_counter_ns() - t)
        else:
            prev = time.perf_counter_ns()
            for _ in range(int(iters.item())):
                dist.all_reduce(buf)
                now = time.perf_counter_ns()
                ts.append(now - prev)
                prev = now
        res[str(n)] = {"ns": ts, "runq_wait_ns": ((runqueue_wait_ns() or 0) - w0) / len(ts)}
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps(res))
    dist.barrier()
    dist.destroy_process_group()


def _ksoftirqd_wait_ns() -> int:
    total = 0
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if (p / "comm").read_text().startswith("ksoftirqd/"):
                total += int((p / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total


#: TCP counters (per namespace) that tell a stalled transfer: tail-loss probes, retransmissions
#: and the DSACKs that show them spurious, receive-window stalls, reordering.
TCP_KEYS = (
    "TCPLossProbes",
    "RetransSegs",
    "TCPDSACKRecv",
    "TCPTimeouts",
    "TCPSackRecovery",
    "TCPOFOQueue",
    "TCPWantZeroWindowAdv",
)


def _tcp_counters(text: str) -> dict[str, int]:
    """/proc/net/netstat + /proc/net/snmp text (header line, value line per group) -> counters."""
    lines = text.splitlines()
    out: dict[str, int] = {}
    for head, vals in zip(lines[0::2], lines[1::2], strict=False):
        for k, v in zip(head.split()[1:], vals.split()[1:], strict=False):
            if k in TCP_KEYS and v.lstrip("-").isdigit():
                out[k] = int(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--sizes", default="64K,256K,1M,4M")
    ap.add_argument("--seconds", type=float, default=1.0, help="per size (loop mode)")
    ap.add_argument("--mode", choices=("loop", "isolated"), default="loop")
    ap.add_argument(
        "--sweeps", type=int, default=1, help="run the sizes N times, each on new connections"
    )
    ap.add_argument("--realtime", action="store_true", help="ranks under SCHED_FIFO")
    ap.add_argument("--burst", type=int, default=None, help="tbf bucket bytes (default: 2 ms)")
    ap.add_argument("--no-ack-priority", action="store_true", help="one FIFO per link")
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument("--out", type=Path, default=None, help="also write the raw times (JSON)")
    ap.add_argument("--rank-out", default=None, help=argparse.SUPPRESS)  # internal: rank mode
    args = ap.parse_args()

    from stallscope.comm import parse_size

    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.rank_out is not None:
        _rank(args.rank_out, sizes, args.seconds, args.mode)
        return 0

    import tempfile

    from stallscope.testbed import Testbed, parse_rate

    rate = parse_rate(args.rate)
    with tempfile.TemporaryDirectory(prefix="stallscope-probe-") as tmp:
        raw_path = Path(tmp) / "raw.json"
        k0 = _ksoftirqd_wait_ns()
        with Testbed(
            nodes=2,
            rate=args.rate,
            mtu=args.mtu,
            burst=args.burst,
            realtime=args.realtime,
            ack_priority=not args.no_ack_priority,
        ) as tb:
            sweeps = []  # per sweep: (raw times, TCP counter deltas of both nodes)
            for _ in range(args.sweeps):  # each sweep a fresh process group: new connections
                argv = [sys.executable, __file__, *sys.argv[1:], "--rank-out", str(raw_path)]
                tcp0 = [
                    _tcp_counters(tb.exec(i, ["cat", "/proc/net/netstat", "/proc/net/snmp"]).stdout)
                    for i in range(2)
                ]
                tb.run(argv, timeout_s=600).check()
                tcp1 = [
                    _tcp_counters(tb.exec(i, ["cat", "/proc/net/netstat", "/proc/net/snmp"]).stdout)
                    for i in range(2)
                ]
                tcp = {
                    k: sum(b.get(k, 0) - a.get(k, 0) for a, b in zip(tcp0, tcp1, strict=True))
                    for k in TCP_KEYS
                }
                sweeps.append((json.loads(raw_path.read_text()), tcp))
            drops = [
                sum(
                    map(int, re.findall(r"dropped (\d+)", tb.exec(i, ["tc", "-s", "qdisc"]).stdout))
                )
                for i in range(2)
            ]
            sw = subprocess.run(
                ["tc", "-n", tb.switch, "-s", "qdisc"], capture_output=True, text=True, check=False
            ).stdout
            drops.append(sum(map(int, re.findall(r"dropped (\d+)", sw))))
            burst = tb.bursts[0]
        ksoft = (_ksoftirqd_wait_ns() - k0) * 1e-6
    print(
        f"{args.rate} {args.mode} realtime={args.realtime} ack_priority={not args.no_ack_priority} "
        f"burst={burst} B: ksoftirqd run-queue wait {ksoft:.0f} ms over the run, qdisc drops {drops}"
    )
    for k, (raw, tcp) in enumerate(sweeps):
        ratios = "  ".join(
            f"{n >> 10}K {st.median(raw[str(n)]['ns']) * 1e-9 / (n * 8 / rate):.3f}" for n in sizes
        )
        print(f"sweep {k}: median/link {ratios}")
        print("  TCP counters (both nodes): " + ", ".join(f"{c} {v}" for c, v in tcp.items() if v))
    raw = sweeps[-1][0]
    print("last sweep per operation:")
    for n in sizes:
        ts = [t * 1e-6 for t in raw[str(n)]["ns"]]
        q = st.quantiles(ts, n=10)
        ideal = n * 8 / rate * 1e3
        print(
            f"{n >> 10:6d} KiB n={len(ts):5d} link {ideal:8.3f} ms  mean {st.mean(ts):8.3f} "
            f"median {st.median(ts):8.3f} p10 {q[0]:8.3f} p90 {q[-1]:8.3f} max {max(ts):8.3f}  "
            f"mean/link {st.mean(ts) / ideal:5.2f}  run-queue wait/op "
            f"{raw[str(n)]['runq_wait_ns'] * 1e-6:6.3f} ms"
        )
    if args.out is not None:
        doc = {"args": vars(args) | {"out": str(args.out)}, "drops": drops, "sweeps": sweeps}
        args.out.write_text(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
