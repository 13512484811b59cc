"""Link kinds (NVLink and NVSwitch generations, PCIe, InfiniBand, cloud networks, Ethernet) with
their sourced bandwidth and typical latency, from ``data/links.json``.

``link(name)`` resolves a name or alias; ``links()`` is the table as a Polars frame.
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

_PACKAGE: Final = "stallscope.predict"
_FILE: Final = "links.json"
_PATH: Final = "stallscope/predict/data/links.json"
TIERS: Final = ("intra", "inter")
#: What one bandwidth figure covers: a GPU's share of the fabric, a network port or NIC, a PCIe
#: slot, or a whole node (cloud instance).
PER: Final = ("gpu", "port", "slot", "node")
LATENCY_KINDS: Final = ("nccl-tuner", "assumption")
_FIGURES: Final = (
    "GBps_per_direction",
    "latency_us",
    "nics_per_node",
    "gpus_per_node",
    "efficiency",
)


@dataclass(frozen=True)
class Link:
    """One link kind. ``bytes_per_s`` is one direction of one ``per`` unit (bytes/s), its line
    rate; ``efficiency`` the share of it NCCL's collectives reach (1.0 where no source gives
    one); ``effective_bytes_per_s`` their product."""

    name: str
    tier: str
    aliases: tuple[str, ...]
    per: str
    bytes_per_s: float
    nominal: str
    latency_us: float
    latency_kind: str
    nics_per_node: int | None
    gpus_per_node: int | None
    notes: str
    sources: dict[str, Source]
    efficiency: float = 1.0

    @property
    def effective_bytes_per_s(self) -> float:
        return self.bytes_per_s * self.efficiency

    @property
    def latency_ns(self) -> int:
        return round(self.latency_us * 1000)

    def source(self, field: str) -> Source:
        """Where ``field`` (a key of links.json, e.g. ``latency_us``) comes from."""
        return self.sources.get(field) or self.sources["default"]


def _parse(entry: dict[str, object], index: int) -> Link:
    name = entry.get("name")
    where = f"{_PATH}, link {name if isinstance(name, str) else index!r}"
    f = Fields(entry, where)
    tier, per, kind = f.text("tier"), f.text("per"), f.text("latency_kind")
    for value, allowed, key in (
        (tier, TIERS, "tier"),
        (per, PER, "per"),
        (kind, LATENCY_KINDS, "latency_kind"),
    ):
        if value not in allowed:
            raise CatalogError(f"{where}: {key} {value!r} is not one of {', '.join(allowed)}")
    nics, gpus = f.optional_integer("nics_per_node"), f.optional_integer("gpus_per_node")
    if per == "node" and gpus is None:
        raise CatalogError(f"{where}: a per-node link needs gpus_per_node to spread it over GPUs")
    present = [k for k in _FIGURES if entry.get(k) is not None]
    efficiency = f.optional_number("efficiency")
    if efficiency is not None:
        if efficiency > 1.0:
            raise CatalogError(
                f"{where}: efficiency is a share of the line rate, <= 1, got {efficiency}"
            )
        if "efficiency" not in (entry.get("sources") or {}):  # type: ignore[operator]
            raise CatalogError(f"{where}: an efficiency needs its own source (sources.efficiency)")
    return Link(
        name=f.text("name"),
        tier=tier,
        aliases=f.texts("aliases"),
        per=per,
        bytes_per_s=f.number("GBps_per_direction") * 1e9,
        nominal=f.text("nominal"),
        latency_us=f.number("latency_us"),
        latency_kind=kind,
        nics_per_node=nics,
        gpus_per_node=gpus,
        notes=f.text("notes", default=""),
        sources=parse_sources(entry.get("sources"), where, present),
        efficiency=1.0 if efficiency is None else efficiency,
    )


@cache
def _catalog() -> tuple[dict[str, Link], NameIndex]:
    parsed = [_parse(e, i) for i, e in enumerate(load_entries(_PACKAGE, _FILE, "links"))]
    index = NameIndex("link", _PATH, ((x.name, x.aliases) for x in parsed))
    return {x.name: x for x in parsed}, index


def link(name: str) -> Link:
    """The link kind ``name`` (a name or alias, any case: ``"NVLink 4"``, ``"ndr"``).

    Raises ``CatalogError`` with the nearest known names when there is none."""
    table, index = _catalog()
    return table[index.resolve(name)]


def link_names() -> tuple[str, ...]:
    """Every link kind's canonical name, in file order."""
    return _catalog()[1].names


def links() -> pl.DataFrame:
    """The link table: one row per kind, bandwidth per direction in GB/s of its ``per`` unit
    and per GPU where that is defined (null for a port or a slot), latency in us, and the
    default source."""
    table, _ = _catalog()
    rows = []
    for x in table.values():
        gbps = x.bytes_per_s / 1e9
        per_gpu = gbps if x.per == "gpu" else (gbps / x.gpus_per_node if x.gpus_per_node else None)
        src = x.source("GBps_per_direction")
        rows.append(
            {
                "name": x.name,
                "tier": x.tier,
                "per": x.per,
                "GBps_per_direction": gbps,
                "GBps_per_gpu": per_gpu,
                "latency_us": x.latency_us,
                "latency_kind": x.latency_kind,
                "efficiency": x.efficiency,
                "nominal": x.nominal,
                "aliases": list(x.aliases),
                "source_url": src.url,
                "source_date": src.date,
            }
        )
    return pl.DataFrame(rows, schema_overrides={"GBps_per_gpu": pl.Float64})
