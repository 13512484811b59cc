"""What each stall category means, in one line each: the one definition that the CLI, the HTML
report and docs/stall-categories.md show (a test keeps the doc in step with it). The rules that
decide them are in _table.py's docstring."""

from __future__ import annotations

from typing import Final

import polars as pl

STALL_MEANINGS: Final[dict[str, str]] = {
    "compute": "the device computes: GPU kernels (CPU runs: forward, backward, optimizer or "
    "other compute regions not blocked on communication)",
    "memcpy": "a copy or memset runs and nothing computes (host-device transfers)",
    "sync_wait": "in a collective, waiting for the last rank of the group to arrive: load "
    "imbalance or a straggler elsewhere",
    "network": "a collective moves data between nodes after every rank arrived: the network "
    "bounds the step",
    "interconnect": "a collective moves data within one node (NVLink, PCIe, shared memory) after "
    "every rank arrived",
    "data_fetch": "waiting for the next batch while the loader reads it (storage, remote files)",
    "data_prep": "waiting for the next batch while the loader decodes and transforms it",
    "data": "waiting for the next batch (the loader did not say whether reading or preparing)",
    "host": "none of the above: Python, kernel launches, CPU-side work while the device idles",
}
"""One line per stall category (the keys are STALL_CATEGORIES, in their priority order)."""


def stall_legend() -> pl.DataFrame:
    """The stall categories and what each means: category, meaning (priority order)."""
    return pl.DataFrame(
        {"category": list(STALL_MEANINGS), "meaning": list(STALL_MEANINGS.values())}
    )
