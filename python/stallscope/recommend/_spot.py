"""Spot (interruptible) instances: the expected time and cost of a job under interruptions,
and the probability that it misses a deadline.

The model (after CM-DARE's transient-server model): interruptions of one instance arrive as a
Poisson process of ``rate`` per instance-hour, independently, so a job on n instances is
interrupted at n x rate per hour (any interruption stops a data-parallel job). The job saves
a checkpoint after every ``interval`` hours of work (saving takes no time); an interruption
loses the work since the last checkpoint and costs ``restart`` hours (a replacement instance,
the job restarted, the checkpoint loaded) during which no interruption arrives.

A segment of L hours of work then takes, in expectation, (e^(Lam L) - 1) (1/Lam + r) hours
(Lam: the job's interruption rate, r: the restart), the work split into whole intervals and a
remainder. The time beyond the work is a sum over segments of a geometric number of failed
attempts, each costing a truncated exponential (the work lost, under L) plus r; its
distribution comes from that compound sum computed on a time grid with the discrete Fourier
transform (exact but for the grid's rounding of each failure to 1/128 of interval + restart),
or, past 1,000 expected interruptions, from the normal distribution with its exact mean and
variance. Every instance is billed for the whole time, restarts included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np

from stallscope.recommend._errors import RecommendError

_BINS_PER_FAILURE: Final = 128  # grid steps per (interval + restart)
_NORMAL_ABOVE: Final = 1000.0  # expected interruptions past which the normal law is used
_MAX_BINS: Final = 1 << 20
_SERIES_BELOW: Final = 1e-6  # rate x length under which truncated moments use their series


@dataclass(frozen=True)
class SpotModel:
    """Checkpoint interval and restart time, hours."""

    interval_hours: float = 1.0
    restart_hours: float = 0.25

    def __post_init__(self) -> None:
        if not (math.isfinite(self.interval_hours) and self.interval_hours > 0):
            raise RecommendError(
                f"the checkpoint interval must be > 0 hours, got {self.interval_hours}"
            )
        if not (math.isfinite(self.restart_hours) and self.restart_hours >= 0):
            raise RecommendError(f"the restart time must be >= 0 hours, got {self.restart_hours}")


def _segments(work: float, interval: float) -> tuple[int, float]:
    """(whole intervals, remainder hours) of ``work`` hours."""
    m = math.floor(work / interval + 1e-12)
    return m, max(0.0, work - m * interval)


def expected_hours(work: float, rate: float, model: SpotModel) -> float:
    """Expected hours to finish ``work`` hours of work at ``rate`` interruptions per hour."""
    if rate <= 0:
        return work
    m, rest = _segments(work, model.interval_hours)
    fails = m * math.expm1(rate * model.interval_hours) + math.expm1(rate * rest)
    return fails / rate + model.restart_hours * fails


def expected_interruptions(work: float, rate: float, model: SpotModel) -> float:
    """Expected interruptions while finishing ``work`` hours of work."""
    if rate <= 0:
        return 0.0
    m, rest = _segments(work, model.interval_hours)
    return m * math.expm1(rate * model.interval_hours) + math.expm1(rate * rest)


def _lost_moments(rate: float, length: float) -> tuple[float, float]:
    """Mean and variance of the work lost by one failure in a segment of ``length`` hours
    (an exponential time truncated to the segment)."""
    x = rate * length
    if x < _SERIES_BELOW:
        return length / 2 - rate * length**2 / 12, length**2 / 12
    em1 = math.expm1(x)
    mean = 1 / rate - length / em1
    second = 2 / rate**2 - (length**2 + 2 * length / rate) / em1
    return mean, max(0.0, second - mean**2)


def _overhead_moments(work: float, rate: float, model: SpotModel) -> tuple[float, float]:
    """Mean and variance of the hours beyond the work."""
    m, rest = _segments(work, model.interval_hours)
    mean = var = 0.0
    for n, length in ((m, model.interval_hours), (1, rest)):
        if n == 0 or length <= 0:
            continue
        q = -math.expm1(-rate * length)  # an attempt fails
        p = 1 - q
        lost, lost_var = _lost_moments(rate, length)
        y = lost + model.restart_hours
        fails, fails_var = q / p, q / p**2
        mean += n * fails * y
        var += n * (fails * lost_var + fails_var * y * y)
    return mean, var


def _failure_spectrum(rate: float, length: float, restart: float, h: float, n: int) -> np.ndarray:
    """The real FFT of one failure's cost (lost work + restart) on a grid of ``n`` steps of
    ``h`` hours, each cost rounded to the nearest step."""
    edges = (np.arange(n + 1) - 0.5) * h - restart
    x = np.clip(edges, 0.0, length)
    cdf = -np.expm1(-rate * x) / -math.expm1(-rate * length)
    pmf = np.diff(cdf)
    return np.fft.rfft(pmf)


def _overhead_grid(work: float, rate: float, model: SpotModel) -> tuple[float, np.ndarray]:
    """(step h, probabilities of the overhead being k x h for k = 0..) for the compound sum."""
    mean, var = _overhead_moments(work, rate, model)
    m, rest = _segments(work, model.interval_hours)
    r = model.restart_hours
    h = (model.interval_hours + r) / _BINS_PER_FAILURE
    reach = mean + 12 * math.sqrt(var) + model.interval_hours + r
    while reach / h > _MAX_BINS / 2:
        h *= 2
    n = 1 << max(4, math.ceil(math.log2(reach / h + 2)))
    total = np.ones(n // 2 + 1, dtype=complex)
    for count, length in ((m, model.interval_hours), (1, rest)):
        if count == 0 or length <= 0:
            continue
        q = -math.expm1(-rate * length)
        seg = (1 - q) / (1 - q * _failure_spectrum(rate, length, r, h, n))
        total *= seg**count
    pmf = np.clip(np.fft.irfft(total, n), 0.0, None)
    return h, pmf / pmf.sum()


def miss_probability(work: float, rate: float, model: SpotModel, budget: float) -> float:
    """Probability that ``work`` hours of work at ``rate`` interruptions per hour take more
    than ``budget`` hours."""
    if work > budget:
        return 1.0
    if rate <= 0:
        return 0.0
    slack = budget - work
    if expected_interruptions(work, rate, model) > _NORMAL_ABOVE:
        mean, var = _overhead_moments(work, rate, model)
        return 0.5 * math.erfc((slack - mean) / math.sqrt(2 * var)) if var > 0 else 0.0
    h, pmf = _overhead_grid(work, rate, model)
    k = math.floor(slack / h + 1e-9)  # overheads of 0..k steps stay within the budget
    return float(max(0.0, pmf[k + 1 :].sum())) if k + 1 < pmf.size else 0.0


def hours_quantile(work: float, rate: float, model: SpotModel, probability: float) -> float:
    """The hours within which the job finishes with ``probability``."""
    if rate <= 0:
        return work
    if expected_interruptions(work, rate, model) > _NORMAL_ABOVE:
        mean, var = _overhead_moments(work, rate, model)
        return work + mean + math.sqrt(var) * _normal_quantile(probability)
    h, pmf = _overhead_grid(work, rate, model)
    k = int(np.searchsorted(np.cumsum(pmf), probability - 1e-12))
    return work + k * h


def _normal_quantile(p: float) -> float:
    """The standard normal quantile (bisection on erfc; p in (0, 1))."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
