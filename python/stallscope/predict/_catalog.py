"""Reading the sourced catalogs: JSON files shipped in a package's ``data/`` folder whose every
outside figure names its source (a URL) and a date.

Shared by the device and link tables here and the planner's model presets and systems. Each
catalog is a JSON object ``{"schema": 1, "about": ..., "<entries>": [...]}``; every entry has a
``name`` and may have ``aliases``. Names resolve case-insensitively, with spaces, underscores and
hyphens alike, so ``"H100 SXM"``, ``"h100_sxm"`` and ``"H100-SXM"`` are one name. A name that
resolves to nothing raises ``CatalogError`` with the closest known names.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Final

from stallscope.exceptions import StallscopeError

SCHEMA: Final = 1
#: A source's date: a day, a month or a year (a standard's approval month, a paper's day).
_DATE: Final = re.compile(r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$")
_SEPARATORS: Final = re.compile(r"[\s_\-]+")


class CatalogError(StallscopeError):
    """A name that is in none of stallscope's sourced catalogs (devices, links, model presets,
    systems), or a catalog file that breaks its rules (a figure without a source, a bad type)."""


@dataclass(frozen=True)
class Source:
    """Where a figure comes from: ``url``; ``date`` (YYYY-MM-DD, YYYY-MM or YYYY); ``where`` in
    the source (table, row, section); ``checked_via``: stored copies that were read when the
    source itself could not be; ``unverified``: no copy of the source could be read to confirm
    the figure, so it rests on what ``where`` says."""

    url: str
    date: str
    where: str = ""
    checked_via: tuple[str, ...] = ()
    unverified: bool = False


def normalize(name: str) -> str:
    """The form names are compared in: lower case, runs of spaces, ``_`` and ``-`` as one ``-``."""
    return _SEPARATORS.sub("-", name.strip().lower()).strip("-")


def load_entries(package: str, filename: str, key: str) -> list[dict[str, object]]:
    """The entries (``key``) of ``package``'s ``data/filename``, checked for shape only."""
    path = f"{package.replace('.', '/')}/data/{filename}"
    try:
        text = resources.files(package).joinpath("data", filename).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise CatalogError(
            f"catalog {path} is missing from this install: reinstall stallscope (the JSON files "
            "under data/ ship with the package)"
        ) from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path} is not valid JSON ({exc}); fix the file") from exc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise CatalogError(f'{path}: expected a JSON object with "schema": {SCHEMA}')
    entries = doc.get(key)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise CatalogError(f'{path}: expected "{key}" to be a list of objects')
    return entries


class Fields:
    """Typed access to one catalog entry; every error names the file, the entry and the field."""

    def __init__(self, entry: Mapping[str, object], where: str) -> None:
        self.entry = entry
        self.where = where

    def _fail(self, key: str, expected: str) -> CatalogError:
        got = self.entry.get(key)
        return CatalogError(
            f"{self.where}: field {key!r} must be {expected}, got {got!r}; fix the catalog entry"
        )

    def text(self, key: str, *, default: str | None = None) -> str:
        value = self.entry.get(key, default)
        if not isinstance(value, str) or (default is None and not value):
            raise self._fail(key, "a non-empty string")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self.entry.get(key)
        if value is None:
            return None
        return self.text(key)

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._fail(key, "a list of non-empty strings")
        return tuple(value)

    def integer(self, key: str, *, default: int | None = None) -> int:
        value = self.entry.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise self._fail(key, "a positive integer")
        return value

    def optional_integer(self, key: str) -> int | None:
        return None if self.entry.get(key) is None else self.integer(key)

    def number(self, key: str) -> float:
        value = self.entry.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            raise self._fail(key, "a positive number")
        return float(value)

    def optional_number(self, key: str) -> float | None:
        return None if self.entry.get(key) is None else self.number(key)

    def flag(self, key: str, *, default: bool) -> bool:
        value = self.entry.get(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def numbers(self, key: str, allowed: Iterable[str]) -> dict[str, float]:
        """A JSON object of positive numbers whose keys are all in ``allowed``."""
        value = self.entry.get(key, {})
        allowed = tuple(allowed)
        if not isinstance(value, dict):
            raise self._fail(key, f"an object with keys among {', '.join(allowed)}")
        out: dict[str, float] = {}
        for k, v in value.items():
            if k not in allowed:
                raise CatalogError(
                    f"{self.where}: {key} has unknown key {k!r}; use one of {', '.join(allowed)}"
                )
            if not isinstance(v, int | float) or isinstance(v, bool) or v <= 0:
                raise CatalogError(f"{self.where}: {key}.{k} must be a positive number, got {v!r}")
            out[k] = float(v)
        return out


def parse_source(value: object, where: str) -> Source:
    """One ``{"url", "date", "where"?, "checked_via"?, "unverified"?}`` object, checked. An
    unverified source must say in ``where`` what the figure rests on."""
    if not isinstance(value, dict):
        raise CatalogError(f"{where}: a source must be an object with url and date, got {value!r}")
    url, date = value.get("url"), value.get("date")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise CatalogError(f"{where}: source url must be an http(s) URL, got {url!r}")
    if not isinstance(date, str) or not _DATE.match(date):
        raise CatalogError(
            f"{where}: source date must be YYYY-MM-DD, YYYY-MM or YYYY, got {date!r}"
        )
    f = Fields(value, where)
    checked = f.texts("checked_via")
    for c in checked:
        if not c.startswith(("https://", "http://")):
            raise CatalogError(f"{where}: checked_via entries must be URLs, got {c!r}")
    unverified = f.flag("unverified", default=False)
    text = f.text("where", default="")
    if unverified and not text:
        raise CatalogError(
            f"{where}: an unverified source needs a 'where' saying what the figure rests on"
        )
    return Source(url=url, date=date, where=text, checked_via=checked, unverified=unverified)


def parse_sources(
    value: object, where: str, covers: Iterable[str], *, has_default: bool = False
) -> dict[str, Source]:
    """A ``{"default"?: source, field: source, ...}`` object that must give every field in
    ``covers`` a source (its own or the default; ``has_default``: the entry has its default
    source elsewhere) and may name no other field."""
    if not isinstance(value, dict) or not value:
        raise CatalogError(f"{where}: 'sources' must be a non-empty object of sources")
    covers = tuple(covers)
    out = {k: parse_source(v, f"{where}, source {k!r}") for k, v in value.items()}
    stray = sorted(set(out) - set(covers) - {"default"})
    if stray:
        raise CatalogError(
            f"{where}: sources for unknown fields {stray}; source one of {', '.join(covers)}"
        )
    if "default" not in out and not has_default:
        missing = [c for c in covers if c not in out]
        if missing:
            raise CatalogError(
                f"{where}: no source for {missing}; add a 'default' source or one per field"
            )
    return out


class NameIndex:
    """Names and aliases of one catalog, each resolving to one canonical name."""

    def __init__(self, kind: str, path: str, entries: Iterable[tuple[str, Iterable[str]]]) -> None:
        self.kind = kind
        self.path = path
        self._names: list[str] = []
        self._by_key: dict[str, str] = {}
        for name, aliases in entries:
            self._names.append(name)
            for label in (name, *aliases):
                key = normalize(label)
                other = self._by_key.get(key)
                if other is not None and other != name:
                    raise CatalogError(
                        f"{path}: {label!r} names both {other!r} and {name!r}; "
                        "make every name and alias unique"
                    )
                self._by_key[key] = name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._names)

    def resolve(self, name: str) -> str:
        """The canonical name ``name`` (a name or an alias, any case) stands for."""
        key = normalize(name)
        hit = self._by_key.get(key)
        if hit is not None:
            return hit
        # Names the query begins (``A100`` -> both A100 sizes) first, then look-alikes.
        prefixed = sorted(k for k in self._by_key if key and k.startswith(key))
        close = difflib.get_close_matches(key, list(self._by_key), n=8, cutoff=0.5)
        nearest = list(dict.fromkeys(self._by_key[k] for k in (*prefixed, *close)))[:5]
        hint = f"nearest: {', '.join(nearest)}" if nearest else "no close name"
        raise CatalogError(
            f"unknown {self.kind} {name!r} ({hint}). Known: {', '.join(self._names)}. "
            f"Use one of these, or add an entry with its sources to {self.path}"
        )
