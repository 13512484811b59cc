"""Is an emulated link full duplex? Plain TCP between the 2 nodes of the test bed, then gloo.

Each size is moved `--reps` times (median reported, the first left out) in five ways:
  oneway   rank 0 sends, rank 1 receives (one socket);
  duplex   both send and receive at once on one socket (as a gloo pair does);
  twosock  both at once, one socket per direction;
  gloo     both at once through torch.distributed (gloo): isend to the peer + irecv from it, a
           barrier before each operation;
  gloo_b2b the same back to back, no barrier (as `bench comm` and nccl-tests time operations).
A full-duplex link gives the three socket ways the link rate per direction. Why: gloo's all-gather,
all-to-all and send/recv between two nodes run at about half the link rate from ~128 KiB per
message (bench/README.md, "Example calibration"); this shows that the emulated link is not the
cause, and that gloo back to back is. Needs root and iproute2:

    python bench/testbed_duplex.py [--rates 1gbit,200mbit,50mbit] [--sizes 128K,1M,4M] [--reps 8]

(the committed results: --sizes 128K,256K,1M,4M --reps 10)

Results: bench/results/testbed_duplex.{json,md}. The rank side is this file run with --rank.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

import orjson

MODES = ("oneway", "duplex", "twosock", "gloo", "gloo_b2b")
CONNECT_TRIES = 200  # x 50 ms: the listener's namespace may come up a little later


def _connect(rank: int, addr: str, port: int) -> socket.socket:
    if rank == 0:
        with socket.socket() as ls:
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((addr, port))
            ls.listen(1)
            ls.settimeout(30.0)
            s, _ = ls.accept()
    else:
        for _ in range(CONNECT_TRIES):
            try:
                s = socket.create_connection((addr, port), timeout=30.0)
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise SystemExit(f"rank 1: no listener at {addr}:{port} after {CONNECT_TRIES} tries")
    s.settimeout(120.0)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def gloo_side(size: int, reps: int, barrier: bool) -> list[float]:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    peer = 1 - dist.get_rank()  # two ranks
    out, into = torch.ones(size // 4), torch.empty(size // 4)
    times = []
    for _ in range(reps):
        if barrier:
            dist.barrier()
        t0 = time.perf_counter()
        for work in (dist.isend(out, peer), dist.irecv(into, peer)):
            work.wait()
        times.append(time.perf_counter() - t0)
    dist.destroy_process_group()
    return times


def rank_side(mode: str, size: int, reps: int) -> None:
    """One rank: move `size` bytes `reps` times; print one JSON line of per-rep seconds."""
    rank, addr = int(os.environ["RANK"]), os.environ["MASTER_ADDR"]
    if mode in ("gloo", "gloo_b2b"):
        times = gloo_side(size, reps, barrier=mode == "gloo")
        print(orjson.dumps({"rank": rank, "seconds": times}).decode(), flush=True)
        return
    port = int(os.environ["MASTER_PORT"]) + 7  # clear of the rendezvous port
    a = _connect(rank, addr, port)
    b = _connect(rank, addr, port + 1) if mode == "twosock" else a
    out, into = bytearray(size), bytearray(size)

    def send(s: socket.socket) -> None:
        s.sendall(out)

    def recv(s: socket.socket) -> None:
        view, n = memoryview(into), 0
        while n < size:
            got = s.recv_into(view[n:])
            if not got:
                raise SystemExit(f"rank {rank}: peer closed after {n} of {size} bytes")
            n += got

    def sync() -> None:
        a.sendall(b"x")
        if a.recv(1) != b"x":
            raise SystemExit(f"rank {rank}: lost step with the peer")

    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        if mode == "oneway":
            send(a) if rank == 0 else recv(a)
            sync()  # the sender's time includes the receiver's last byte
        else:
            mine = a if mode == "duplex" or rank == 0 else b
            theirs = a if mode == "duplex" or rank == 1 else b
            t = threading.Thread(target=send, args=(mine,))
            t.start()
            recv(theirs)
            t.join()
        times.append(time.perf_counter() - t0)
    print(orjson.dumps({"rank": rank, "seconds": times}).decode(), flush=True)


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rates", default="1gbit,200mbit,50mbit")
    ap.add_argument("--sizes", default="128K,1M,4M")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "testbed_duplex"
    )
    ap.add_argument("--rank", nargs=3, metavar=("MODE", "BYTES", "REPS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        rank_side(args.rank[0], int(args.rank[1]), int(args.rank[2]))
        return 0
    if args.reps < 2:
        ap.error("--reps must be >= 2 (the first repetition is left out)")

    from stallscope.comm._neighbour import cpu_sample, neighbour_guard, others_during
    from stallscope.testbed import Testbed, parse_rate

    rows = []
    for rate in args.rates.split(","):
        before, s0 = neighbour_guard(), cpu_sample()
        with Testbed(nodes=2, ranks_per_node=1, rate=rate, mtu=args.mtu, realtime=True) as tb:
            for mode in MODES:
                for size in (_size(s) for s in args.sizes.split(",")):
                    argv = [sys.executable, __file__, "--rank", mode, str(size), str(args.reps)]
                    res = tb.run(argv, timeout_s=300).check()
                    for text in res.outputs:
                        doc = orjson.loads(text.strip().splitlines()[-1])
                        med = statistics.median(doc["seconds"][1:])
                        rows.append(
                            {
                                "rate": rate,
                                "rate_bits": parse_rate(rate),
                                "mode": mode,
                                "bytes": size,
                                "rank": doc["rank"],
                                "seconds": doc["seconds"],
                                "median_s": med,
                                "mbit_per_direction": size * 8 / med / 1e6,
                            }
                        )
        s1, after = cpu_sample(), neighbour_guard()
        during = None if s0 is None or s1 is None else others_during(s0, s1)
        for r in rows:
            if r["rate"] == rate:
                r["guard"] = [before.ratio, after.ratio]
                r["others_during"] = None if during is None else during.to_dict()
    doc = {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "mtu": args.mtu,
        "reps": args.reps,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    lines = [
        "# Is the emulated link full duplex? Plain TCP between 2 test-bed nodes",
        "",
        f"{doc['created']}, MTU {args.mtu}, ranks under SCHED_FIFO, the test bed's defaults; "
        f"median of {args.reps - 1} repetitions per size (the first left out), per receiving "
        "rank. 'others' is the rest of the machine's CPU + hypervisor steal during the rate's runs.",
        "",
        "| rate | bytes | oneway | duplex (one socket) rank 0 / 1 | twosock rank 0 / 1 | gloo isend+irecv, barrier, rank 0 / 1 | gloo back to back rank 0 / 1 | guard before / after | others (cores) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for rate in args.rates.split(","):
        for size in (_size(s) for s in args.sizes.split(",")):
            got = {
                (r["mode"], r["rank"]): r["mbit_per_direction"]
                for r in rows
                if r["rate"] == rate and r["bytes"] == size
            }
            any_row = next(r for r in rows if r["rate"] == rate)
            od = any_row["others_during"]
            lines.append(
                f"| {rate} | {size >> 10} KiB | {got[('oneway', 1)]:.1f} | "
                f"{got[('duplex', 0)]:.1f} / {got[('duplex', 1)]:.1f} | "
                f"{got[('twosock', 0)]:.1f} / {got[('twosock', 1)]:.1f} | "
                f"{got[('gloo', 0)]:.1f} / {got[('gloo', 1)]:.1f} | "
                f"{got[('gloo_b2b', 0)]:.1f} / {got[('gloo_b2b', 1)]:.1f} | "
                f"{any_row['guard'][0]:.2f}x / {any_row['guard'][1]:.2f}x | "
                + ("-" if od is None else f"{od['others_cores'] + od['steal_cores']:.2f}")
                + " |"
            )
    lines.append("")
    lines.append("Mbit/s per direction (payload bytes x 8 / median time).")
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
