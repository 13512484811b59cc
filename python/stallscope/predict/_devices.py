"""Accelerators with their sourced peaks, memory and links, from ``data/devices.json``.

``device(name)`` resolves a name or alias (``"H100"``, ``"NVIDIA A100-SXM4-80GB"``,
``"a100_40gb"``) case-insensitively; ``devices()`` is the table as a Polars frame. Peaks are
dense (no 2:4 sparsity), in TFLOP/s as the sources print them; ``Device.peak_flops`` gives
FLOP/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

import polars as pl

from stallscope.predict._catalog import (
    CatalogError,
    Fields,
    NameIndex,
    Source,
    load_entries,
    parse_sources,
)
from stallscope.predict._links import link

_PACKAGE: Final = "stallscope.predict"
_FILE: Final = "devices.json"
_PATH: Final = "stallscope/predict/data/devices.json"
#: Precisions a peak may be given for. fp64/fp32: non-tensor rates; fp64_tensor: FP64 on tensor
#: (matrix) cores; tf32, fp16, bf16, fp8, fp4: tensor-core rates, dense.
PRECISIONS: Final = ("fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
_FIGURES: Final = (
    "peak_tflops",
    "memory_gb",
    "memory_bandwidth_GBps",
    "sm_count",
    "l2_mb",
    "board_power_w",
)


@dataclass(frozen=True)
class Device:
    """One accelerator. ``memory_gb`` is 10^9 bytes; ``memory_bandwidth_bytes_per_s`` bytes/s;
    ``sm_count`` counts SMs (NVIDIA) or compute units (AMD); ``None`` where no source gives it."""

    name: str
    vendor: str
    aliases: tuple[str, ...]
    peak_tflops: dict[str, float]
    memory_gb: float
    memory_bandwidth_bytes_per_s: float
    sm_count: int | None
    l2_mb: float | None
    board_power_w: float | None
    intra_node_link: str | None
    notes: str
    sources: dict[str, Source]

    def peak_flops(self, precision: str) -> float:
        """Dense peak in FLOP/s at ``precision`` (one of ``PRECISIONS``)."""
        if precision not in PRECISIONS:
            raise CatalogError(
                f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}"
            )
        tflops = self.peak_tflops.get(precision)
        if tflops is None:
            have = ", ".join(self.peak_tflops) or "none"
            raise CatalogError(
                f"{self.name} has no sourced {precision} peak (it has: {have}); pick another "
                f"precision or add the figure with its source to {_PATH}"
            )
        return tflops * 1e12

    def source(self, field: str) -> Source:
        """Where ``field`` (a key of devices.json, e.g. ``memory_gb``) comes from."""
        return self.sources.get(field) or self.sources["default"]


def _parse(entry: dict[str, object], index: int) -> Device:
    name = entry.get("name")
    where = f"{_PATH}, device {name if isinstance(name, str) else index!r}"
    f = Fields(entry, where)
    link_name = f.optional_text("intra_node_link")
    if link_name is not None:
        try:
            link_name = link(link_name).name
        except CatalogError as exc:
            raise CatalogError(f"{where}: intra_node_link: {exc}") from exc
    present = [k for k in _FIGURES if entry.get(k) is not None and entry.get(k) != {}]
    if entry.get("aliases"):  # names a driver or a trace reports may need their own source
        present.append("aliases")
    return Device(
        name=f.text("name"),
        vendor=f.text("vendor"),
        aliases=f.texts("aliases"),
        peak_tflops=f.numbers("peak_tflops", PRECISIONS),
        memory_gb=f.number("memory_gb"),
        memory_bandwidth_bytes_per_s=f.number("memory_bandwidth_GBps") * 1e9,
        sm_count=f.optional_integer("sm_count"),
        l2_mb=f.optional_number("l2_mb"),
        board_power_w=f.optional_number("board_power_w"),
        intra_node_link=link_name,
        notes=f.text("notes", default=""),
        sources=parse_sources(entry.get("sources"), where, present),
    )


@cache
def _catalog() -> tuple[dict[str, Device], NameIndex]:
    parsed = [_parse(e, i) for i, e in enumerate(load_entries(_PACKAGE, _FILE, "devices"))]
    index = NameIndex("device", _PATH, ((d.name, d.aliases) for d in parsed))
    return {d.name: d for d in parsed}, index


def device(name: str) -> Device:
    """The device ``name`` (a name or alias, any case, spaces/``_``/``-`` alike).

    Raises ``CatalogError`` with the nearest known names when there is none."""
    table, index = _catalog()
    return table[index.resolve(name)]


def device_names() -> tuple[str, ...]:
    """Every device's canonical name, in file order."""
    return _catalog()[1].names


def devices() -> pl.DataFrame:
    """The device table: one row per device; ``peak_<precision>_tflops`` columns (null where
    there is no sourced figure), memory in GB, bandwidth in GB/s, and the default source."""
    table, _ = _catalog()
    rows = []
    for d in table.values():
        row: dict[str, object] = {"name": d.name, "vendor": d.vendor}
        row |= {f"peak_{p}_tflops": d.peak_tflops.get(p) for p in PRECISIONS}
        row |= {
            "memory_gb": d.memory_gb,
            "memory_bandwidth_GBps": d.memory_bandwidth_bytes_per_s / 1e9,
            "sm_count": d.sm_count,
            "l2_mb": d.l2_mb,
            "board_power_w": d.board_power_w,
            "intra_node_link": d.intra_node_link,
            "aliases": list(d.aliases),
            "source_url": d.sources["default"].url if "default" in d.sources else None,
            "source_date": d.sources["default"].date if "default" in d.sources else None,
        }
        rows.append(row)
    schema = {f"peak_{p}_tflops": pl.Float64 for p in PRECISIONS} | {
        "sm_count": pl.Int64,
        "l2_mb": pl.Float64,
        "board_power_w": pl.Float64,
        "intra_node_link": pl.String,
        "source_url": pl.String,
        "source_date": pl.String,
    }
    return pl.DataFrame(rows, schema_overrides=schema)
