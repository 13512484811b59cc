"""Clock offsets between ranks: Cristian's method over the job's process group.

A client (every rank but 0) stamps t0, sends it to rank 0, rank 0 answers with its clock s, the
client stamps t1 on receipt. Rank 0 read s somewhere inside [t0, t1] of the client's clock, so
with offset = s - (t0 + t1) / 2 the true offset lies within +- (t1 - t0) / 2. Of several
exchanges the one with the smallest round trip is kept. Aligned time = local time + offset.

The exchange logic takes a transport (send / recv of one int64) and a clock, so it is tested
without torch; `measure_torch` runs it over torch.distributed point-to-point operations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_ROUNDS = 16
_TAG = 0x5C0C  # keeps the exchange apart from the user's own send / recv


@dataclass(frozen=True)
class Sample:
    """One offset measurement of a rank against rank 0 (all ns)."""

    local_ns: int  # the client's clock at the middle of the kept exchange
    offset_ns: int  # add to local time to get rank 0's time
    error_ns: int  # |true offset - offset_ns| <= error_ns (half the kept round trip)
    rtt_ns: int  # round trip of the kept exchange

    def as_json(self) -> dict[str, int]:
        return {
            "local_ns": self.local_ns,
            "offset_ns": self.offset_ns,
            "error_ns": self.error_ns,
            "rtt_ns": self.rtt_ns,
        }


def best_sample(exchanges: list[tuple[int, int, int]]) -> Sample:
    """The sample of the exchange (t0, server_ns, t1) with the smallest round trip."""
    if not exchanges:
        raise ValueError("no clock exchange completed")
    t0, s, t1 = min(exchanges, key=lambda e: e[2] - e[0])
    if t1 < t0:
        raise ValueError(f"clock went backwards in an exchange: t0={t0} t1={t1}")
    mid = (t0 + t1) // 2
    rtt = t1 - t0
    return Sample(local_ns=mid, offset_ns=s - mid, error_ns=(rtt + 1) // 2, rtt_ns=rtt)


def client(
    send: Callable[[int], None], recv: Callable[[], int], now: Callable[[], int], rounds: int
) -> Sample:
    """The non-zero rank's side: `rounds` exchanges with the server, best one kept."""
    ex = []
    for _ in range(rounds):
        t0 = now()
        send(t0)
        s = recv()
        t1 = now()
        ex.append((t0, s, t1))
    return best_sample(ex)


def server(
    send: Callable[[int], None], recv: Callable[[], int], now: Callable[[], int], rounds: int
) -> None:
    """Rank 0's side for one client: answer each ping with the local clock."""
    for _ in range(rounds):
        recv()
        send(now())


def reference_sample(now: Callable[[], int]) -> Sample:
    """Rank 0's own entry: offset 0, exact."""
    return Sample(local_ns=now(), offset_ns=0, error_ns=0, rtt_ns=0)


def measure_torch(
    group: Any,
    rank: int,
    world_size: int,
    now: Callable[[], int],
    *,
    rounds: int = DEFAULT_ROUNDS,
    timeout_s: float = 30.0,
    peers: list[int] | None = None,
) -> tuple[Sample | None, list[str]]:
    """Run the exchange over torch.distributed (`group`: a process group whose backend takes CPU
    tensors, e.g. gloo). Every rank in `peers` (default: all) must call it at the same point;
    rank 0 serves the other ranks in `peers`, one after the other. Returns this
    rank's sample (None when its exchange failed) and the problems met (a dead peer, a timeout):
    a failed exchange never raises."""
    import datetime

    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    buf = torch.zeros(1, dtype=torch.int64)

    def send_to(peer: int) -> Callable[[int], None]:
        def send(v: int) -> None:
            buf[0] = v
            work = dist.isend(buf, dst=peer, group=group, tag=_TAG)
            if work is not None:  # None: this rank is not in `group`
                work.wait(timeout)

        return send

    def recv_from(peer: int) -> Callable[[], int]:
        def recv() -> int:
            work = dist.irecv(buf, src=peer, group=group, tag=_TAG)
            if work is not None:
                work.wait(timeout)
            return int(buf[0])

        return recv

    problems: list[str] = []
    if rank == 0:
        for r in peers if peers is not None else range(world_size):
            if r == 0:
                continue
            try:
                server(send_to(r), recv_from(r), now, rounds)
            except Exception as e:  # a dead or hung rank: serve the others
                problems.append(f"clock exchange with rank {r} failed: {type(e).__name__}: {e}")
        return reference_sample(now), problems
    try:
        return client(send_to(0), recv_from(0), now, rounds), problems
    except Exception as e:
        problems.append(f"clock exchange with rank 0 failed: {type(e).__name__}: {e}")
        return None, problems
