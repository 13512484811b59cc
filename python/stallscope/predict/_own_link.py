"""The measured run's own link within a node, for a CPU run on one node given no calibration.

A bucket's all-reduce as the trace times it (hook call to completion) holds more than its
transfer: the wait for the other ranks to reach it, and on a CPU the earlier buckets still in
flight, which could not progress while the cores computed. Its bytes over that time is a link
several times too slow (a loaded 2-core machine: 1.0 Gbit/s where the transfer ran at ~2.6).

The stall table has already separated what the transfer cost the step: its interconnect column
(the communication in flight once the rank stopped computing and every member had arrived;
the wait for members is sync wait). So the link is fitted to it: the seconds per byte at which
predicting the measured configuration, with everything else as measured, exposes exactly the
measured interconnect time. The simulated exposure grows with the seconds per byte, so a
bisection finds it. Where the run exposed no transfer (its all-reduces hid behind compute) the
link is at least as fast as the fastest that still hides them, and no slower than the buckets'
own times say.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from stallscope.predict._comm import Tier

#: Bisection bounds (s per byte): 10 TB/s .. 1 kB/s, in log space.
_LO: Final = 1e-13
_HI: Final = 1e-3
_STEPS: Final = 48  # log2(_HI / _LO) = 33 doublings; 48 halvings give < 1e-4 relative
#: Measured exposure below this share of the step is taken as none (timer and rounding noise).
_NONE_SHARE: Final = 1e-3
SOURCE: Final = (
    "the measured run's exposed all-reduce time (its interconnect column), fitted so that the "
    "measured configuration predicts it back"
)


def fit_own_link(
    exposed_ns: Callable[[float], float], target_ns: float, step_ns: float, rough: Tier | None
) -> Tier | None:
    """The tier whose seconds per byte makes ``exposed_ns(beta)`` (the simulated interconnect
    time of the measured configuration) equal ``target_ns``. ``rough``: the buckets' own
    fastest time per byte (an upper bound on the seconds per byte), or None."""
    if target_ns <= _NONE_SHARE * step_ns:
        lo, hi = math.log(_LO), math.log(_HI)
        if exposed_ns(_LO) > _NONE_SHARE * step_ns:
            return rough  # exposed even on the fastest link: the model cannot hide it
        for _ in range(_STEPS):  # the slowest link that still hides every transfer
            mid = (lo + hi) / 2
            if exposed_ns(math.exp(mid)) <= _NONE_SHARE * step_ns:
                lo = mid
            else:
                hi = mid
        beta = math.exp(lo)
        if rough is not None:
            beta = min(beta, rough.beta_s_per_byte)
        return Tier(0.0, beta, SOURCE + "; none was exposed: as fast as hides it")
    lo, hi = math.log(_LO), math.log(_HI)
    if exposed_ns(_HI) < target_ns:
        return rough
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        if exposed_ns(math.exp(mid)) < target_ns:
            lo = mid
        else:
            hi = mid
    return Tier(0.0, math.exp((lo + hi) / 2), SOURCE)
