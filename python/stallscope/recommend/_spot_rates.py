"""Interruption rates of configurations: the sum over their instances of each instance's rate
per hour, from the spot interruption table (the same cloud and instance type; the same region
when the table has it, else the table's region for that type) or one rate the user gives."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import polars as pl

from stallscope.recommend._errors import RecommendError


@dataclass
class SpotRates:
    """Per (cloud, region, instance) rate lookups, and what they rested on."""

    table: pl.DataFrame | None
    user_rate: float | None = None
    borrowed: set[tuple[str, str, str]] = field(default_factory=set)  # (instance, ours, theirs)
    lower_bounds: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.user_rate is not None and not (
            math.isfinite(self.user_rate) and self.user_rate >= 0
        ):
            raise RecommendError(
                f"an interruption rate is a number of interruptions per instance-hour >= 0, "
                f"got {self.user_rate}"
            )
        self._by_region: dict[tuple[str, str, str], tuple[float, bool]] = {}
        self._by_type: dict[tuple[str, str], tuple[str, float, bool]] = {}
        if self.table is None:
            return
        for r in self.table.iter_rows(named=True):
            top = r["band_high_pct"] is None  # the top band: its rate is a lower bound
            self._by_region[(r["cloud"], r["region"], r["instance"])] = (r["rate_per_hour"], top)
            self._by_type.setdefault(
                (r["cloud"], r["instance"]), (r["region"], r["rate_per_hour"], top)
            )

    def rate(self, cloud: str, region: str, instance: str) -> float | None:
        """Interruptions per instance-hour of one instance type, None when unknown."""
        if self.user_rate is not None:
            return self.user_rate
        hit = self._by_region.get((cloud, region, instance))
        if hit is None:
            other = self._by_type.get((cloud, instance))
            if other is None:
                return None
            self.borrowed.add((instance, region, other[0]))
            hit = (other[1], other[2])
        if hit[1]:
            self.lower_bounds.add(instance)
        return hit[0]

    def config_rate(self, cloud: str, region: str, parts: list[dict[str, object]]) -> float | None:
        """Interruptions per hour of a configuration (``parts``: instance and count)."""
        total = 0.0
        for p in parts:
            one = self.rate(cloud, region, str(p["instance"]))
            if one is None:
                return None
            count = p["count"]
            assert isinstance(count, int)
            total += count * one
        return total

    def notes(self) -> list[str]:
        """What the rates rest on, for the recommendation's notes."""
        if self.user_rate is not None:
            return [f"spot interruptions: {self.user_rate:g} per instance-hour (given)"]
        out = []
        places = sorted({(ours, theirs) for _, ours, theirs in self.borrowed})
        for ours, theirs in places:
            names = sorted(i for i, o, t in self.borrowed if (o, t) == (ours, theirs))
            out.append(
                f"spot interruptions in {ours} of {', '.join(names)}: the published bands for "
                f"{theirs} (the table has none for {ours})"
            )
        if self.lower_bounds:
            out.append(
                "spot interruption rates of "
                + ", ".join(sorted(self.lower_bounds))
                + " are lower bounds (the top band, over 20 % a month)"
            )
        return out
