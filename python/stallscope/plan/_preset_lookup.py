"""Model and system presets by name: the tables of ``plan/data/models.json`` and
``plan/data/systems.json`` (each entry with its sources), with nearest-name errors."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stallscope.plan._errors import PlanError, listed, nearest_names

if TYPE_CHECKING:
    from stallscope.plan._model import Model
    from stallscope.plan._system import System

_DATA = Path(__file__).with_name("data")


@cache
def _table(kind: str) -> dict[str, dict[str, Any]]:
    """name -> entry of models.json / systems.json, whether the file holds an object keyed by
    name, a list of entries with a "name", or either under a top-level "models" / "systems"."""
    path = _DATA / f"{kind}.json"
    if not path.exists():
        return {}
    doc: Any = json.loads(path.read_text())
    if isinstance(doc, dict) and isinstance(doc.get(kind), (dict, list)):
        doc = doc[kind]
    if isinstance(doc, list):
        return {str(e["name"]): e for e in doc if isinstance(e, dict) and "name" in e}
    return {k: v for k, v in doc.items() if isinstance(v, dict)}


def _find(kind: str, name: str) -> tuple[str, dict[str, Any]]:
    table = _table(kind)
    norm = {_norm(k): k for k in table}
    for k, entry in table.items():
        for alias in entry.get("aliases", ()):
            norm.setdefault(_norm(str(alias)), k)
    key = norm.get(_norm(name))
    if key is None:
        what = "model" if kind == "models" else "system"
        if not table:
            raise PlanError(
                f"no {what} preset named {name!r}: no presets are installed; give a JSON file"
            )
        raise PlanError(
            f"unknown {what} preset {name!r}: nearest {listed(nearest_names(name, table))} "
            f"(all: {listed(sorted(table))}); or give a JSON file"
        )
    return key, table[key]


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def preset_names(kind: str) -> list[str]:
    """The presets of ``kind`` ("models" or "systems")."""
    return sorted(_table(kind))


def preset_model(name: str) -> Model:
    from stallscope.plan._model import model_from_dict

    key, entry = _find("models", name)
    return model_from_dict({**entry, "name": key}, name=key)


def preset_system(name: str) -> System:
    from stallscope.plan._system import system_from_dict

    key, entry = _find("systems", name)
    return system_from_dict({**entry, "name": key}, name=key)
