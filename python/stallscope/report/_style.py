"""The report's fixed colours and number formats: a category has the same colour in every plot
of every report."""

from __future__ import annotations

from typing import Final

CATEGORY_COLORS: Final[dict[str, str]] = {
    "compute": "#2e7d32",  # green: useful work
    "memcpy": "#8e24aa",
    "sync_wait": "#d32f2f",  # red: waiting for another rank
    "network": "#ef6c00",
    "interconnect": "#f9a825",
    "data_fetch": "#1565c0",
    "data_prep": "#42a5f5",
    "data": "#0d47a1",
    "host": "#9e9e9e",  # grey: nothing attributed
}
"""One colour per stall category (keys: STALL_CATEGORIES)."""

SERIES_COLORS: Final[tuple[str, ...]] = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
"""Colours of other series (collectives, configurations), in order."""

MS: Final = 1e6  # ns per ms


def ms(ns: float) -> str:
    """ns as ms, 3 significant digits at least: 0.0123 ms, 1.23 ms, 123 ms, 1,234 ms."""
    v = ns / MS
    if v >= 100:
        return f"{v:,.0f} ms"
    if v >= 1:
        return f"{v:.2f} ms"
    return f"{v:.3g} ms"


def pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def size(nbytes: float) -> str:
    """Bytes in binary units: 512 B, 64 KiB, 1.5 MiB."""
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= n:
            v = nbytes / n
            return f"{v:.0f} {unit}" if v >= 10 or v == int(v) else f"{v:.1f} {unit}"
    return f"{nbytes:.0f} B"
