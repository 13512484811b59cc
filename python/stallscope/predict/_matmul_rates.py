"""Achievable dense matmul rates, from ``data/matmul_rates.json``: per GPU family and precision,
the best rate a GPU's matrix multiplications were measured at (a brute-force search over shapes,
or the best of a few square sizes), each row with its source.

A datasheet peak is a clock times the tensor cores' width; boards under a low power limit (the
70 W T4, the 72 W L4, PCIe cards) reach far less of it than a 700 W module. Moving compute
between GPUs by these rates, not by peaks, keeps that difference: a profile measured on an H100
takes 794.5 / 70.89 = 11.2 times longer on an L4 in bf16, where the peaks say 989 / 121 = 8.2.

``rate_row(name, precision)`` finds a GPU's row: the longest family name the GPU's name begins
with, up to a separator ("A100-SXM4-80GB" takes "A100", an L40S never the L4's), a PCIe card
only a PCIe row. ``achievable_tflops(device, precision)`` is that row's rate, or, for a GPU
without one, its dense peak times ``default_fraction`` (the H100 SXM's measured fraction);
``timed(device, precision)`` says whether the GPU has either.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from stallscope.predict._devices import Device

_FILE: Final = "matmul_rates.json"


@cache
def matmul_rates() -> dict[str, Any]:
    """data/matmul_rates.json: the rows, their methods and the default fraction."""
    text = resources.files("stallscope.predict").joinpath("data", _FILE).read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def same_board(name: str, family: str) -> bool:
    """Whether the GPU ``name`` (upper case, no spaces) is a board of the row ``family`` (upper
    case): the family's name up to a separator, and a PCIe card only for a PCIe row (another
    board, clocks and power)."""
    if not name.startswith(family):
        return False
    if len(name) > len(family) and name[len(family)].isalnum():  # L40S is not an L4
        return False
    return ("PCIE" in family) == ("PCIE" in name)


def rate_row(name: str, precision: str) -> tuple[str, dict[str, Any]] | None:
    """The measured row of the GPU called ``name`` at ``precision`` and its family; None if
    none (module docstring)."""
    up = name.upper().replace(" ", "-")
    rows: dict[str, dict[str, Any]] = matmul_rates()["devices"]
    best = ""
    for family, by_precision in rows.items():
        if precision in by_precision and same_board(up, family.upper()) and len(family) > len(best):
            best = family
    return (best, rows[best][precision]) if best else None


def timed(device: Device, precision: str) -> bool:
    """Whether ``device``'s matrix kernels have a rate at ``precision``: a peak or a measured
    row (the A10G has rows but no published peak)."""
    return precision in device.peak_tflops or rate_row(device.name, precision) is not None


def achievable_tflops(device: Device, precision: str) -> float:
    """TFLOP/s ``device``'s matrix kernels reach at ``precision`` (``timed``): its row's
    measured rate, else its dense peak times the default fraction."""
    found = rate_row(device.name, precision)
    if found is not None:
        return float(found[1]["tflops"])
    return device.peak_tflops[precision] * float(matmul_rates()["default_fraction"])
