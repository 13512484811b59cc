"""Node presets (DGX generations, the nodes of NVIDIA's Selene and Eos, cloud GPU instances)
with their sourced GPU, links and bandwidths, from ``data/systems.json``.

``system(name)`` resolves a name or alias; ``systems()`` is the table as a Polars frame. The
GPU and links must name entries of ``stallscope.predict``'s device and link tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

import polars as pl

from stallscope.predict import device, link
from stallscope.predict._catalog import (
    CatalogError,
    Fields,
    NameIndex,
    Source,
    load_entries,
    parse_sources,
)

_PACKAGE: Final = "stallscope.plan"
_FILE: Final = "systems.json"
_PATH: Final = "stallscope/plan/data/systems.json"
_FIGURES: Final = (
    "gpu",
    "gpus_per_node",
    "intra_node_link",
    "intra_node_GBps",
    "inter_node_link",
    "nics_per_node",
    "inter_node_Gbps",
)


@dataclass(frozen=True)
class System:
    """One node kind. ``intra_node_bytes_per_s``: per GPU, per direction, inside the node;
    ``inter_node_bytes_per_s``: per node, per direction, across nodes (all compute NICs)."""

    name: str
    aliases: tuple[str, ...]
    gpu: str
    gpus_per_node: int
    intra_node_link: str
    intra_node_bytes_per_s: float
    inter_node_link: str
    nics_per_node: int
    inter_node_bytes_per_s: float
    notes: str
    sources: dict[str, Source]

    def source(self, field: str) -> Source:
        """Where ``field`` (a key of systems.json) comes from."""
        return self.sources.get(field) or self.sources["default"]


def _resolve_link(name: str, tier: str, where: str) -> str:
    try:
        found = link(name)
    except CatalogError as exc:
        raise CatalogError(f"{where}: {exc}") from exc
    if found.tier != tier:
        raise CatalogError(f"{where}: link {found.name!r} is tier {found.tier!r}, not {tier!r}")
    return found.name


def _parse(entry: dict[str, object], index: int) -> System:
    name = entry.get("name")
    where = f"{_PATH}, system {name if isinstance(name, str) else index!r}"
    f = Fields(entry, where)
    try:
        gpu = device(f.text("gpu")).name
    except CatalogError as exc:
        raise CatalogError(f"{where}: gpu: {exc}") from exc
    return System(
        name=f.text("name"),
        aliases=f.texts("aliases"),
        gpu=gpu,
        gpus_per_node=f.integer("gpus_per_node"),
        intra_node_link=_resolve_link(f.text("intra_node_link"), "intra", where),
        intra_node_bytes_per_s=f.number("intra_node_GBps") * 1e9,
        inter_node_link=_resolve_link(f.text("inter_node_link"), "inter", where),
        nics_per_node=f.integer("nics_per_node"),
        inter_node_bytes_per_s=f.number("inter_node_Gbps") * 1e9 / 8,
        notes=f.text("notes", default=""),
        sources=parse_sources(entry.get("sources"), where, _FIGURES),
    )


@cache
def _catalog() -> tuple[dict[str, System], NameIndex]:
    parsed = [_parse(e, i) for i, e in enumerate(load_entries(_PACKAGE, _FILE, "systems"))]
    index = NameIndex("system", _PATH, ((s.name, s.aliases) for s in parsed))
    return {s.name: s for s in parsed}, index


def system(name: str) -> System:
    """The node kind ``name`` (a name or alias, any case: ``"DGX H100"``, ``"p4d"``).

    Raises ``CatalogError`` with the nearest known names when there is none."""
    table, index = _catalog()
    return table[index.resolve(name)]


def system_names() -> tuple[str, ...]:
    """Every system's canonical name, in file order."""
    return _catalog()[1].names


def systems() -> pl.DataFrame:
    """The system table: one row per node kind, bandwidths per direction (GB/s per GPU inside,
    Gb/s per node across), and the default source."""
    table, _ = _catalog()
    rows = [
        {
            "name": s.name,
            "gpu": s.gpu,
            "gpus_per_node": s.gpus_per_node,
            "intra_node_link": s.intra_node_link,
            "intra_node_GBps": s.intra_node_bytes_per_s / 1e9,
            "inter_node_link": s.inter_node_link,
            "nics_per_node": s.nics_per_node,
            "inter_node_Gbps": s.inter_node_bytes_per_s * 8 / 1e9,
            "aliases": list(s.aliases),
            "source_url": s.source("gpu").url,
            "source_date": s.source("gpu").date,
        }
        for s in table.values()
    ]
    return pl.DataFrame(rows)
