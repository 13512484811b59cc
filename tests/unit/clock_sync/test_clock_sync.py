"""Cristian's method: the kept exchange brackets the true offset between two clocks."""

from __future__ import annotations

import queue
import random
import threading
import time

import pytest

from stallscope.capture._clock_sync import best_sample, client, reference_sample, server

SKEW_NS = 123_456_789  # the client's clock runs this far behind the server's


def _pair(delay_s: list[float], rounds: int = 24) -> tuple[int, int, int]:
    """(measured offset, error bound, true offset) of one client / server exchange over queues
    with random one-way delays drawn from delay_s."""
    to_server: queue.Queue[int] = queue.Queue()
    to_client: queue.Queue[int] = queue.Queue()
    rng = random.Random(7)

    def server_now() -> int:
        return time.monotonic_ns()

    def client_now() -> int:
        return time.monotonic_ns() - SKEW_NS

    def send_slow(q: queue.Queue[int]):  # type: ignore[no-untyped-def]
        def send(v: int) -> None:
            time.sleep(rng.choice(delay_s))
            q.put(v)

        return send

    t = threading.Thread(
        target=server, args=(send_slow(to_client), to_server.get, server_now, rounds)
    )
    t.start()
    s = client(send_slow(to_server), to_client.get, client_now, rounds)
    t.join()
    return s.offset_ns, s.error_ns, SKEW_NS


@pytest.mark.parametrize("delays", [[0.0], [0.0, 0.002, 0.005], [0.001, 0.010]])
def test_offset_within_the_bound_whatever_the_delays(delays: list[float]) -> None:
    offset, error, truth = _pair(delays)
    assert abs(offset - truth) <= error
    assert error <= 11_000_000  # at worst half the largest round trip (two 10 ms hops)


def test_the_smallest_round_trip_is_kept() -> None:
    ex = [(0, 1_000_050, 100), (1000, 1_001_000 + 7, 1010), (2000, 2_000_900, 5000)]
    s = best_sample(ex)
    assert s.rtt_ns == 10
    assert s.local_ns == 1005
    assert s.offset_ns == 1_001_007 - 1005
    assert s.error_ns == 5


def test_bad_exchanges_are_refused() -> None:
    with pytest.raises(ValueError, match="no clock exchange"):
        best_sample([])
    with pytest.raises(ValueError, match="backwards"):
        best_sample([(10, 5, 3)])


def test_rank_0_is_the_reference() -> None:
    s = reference_sample(lambda: 42)
    assert (s.local_ns, s.offset_ns, s.error_ns) == (42, 0, 0)
