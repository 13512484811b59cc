"""`stallscope.backends()`: which capture backends can run here, and why not."""

from __future__ import annotations

import importlib

import polars as pl

from stallscope.capture import _hooks


def backends() -> pl.DataFrame:
    """One row per capture backend (every entry of the backend registry): ``backend``,
    ``available`` (can it run in this process now), ``default_on`` (does a trace that names no
    backends run it) and ``reason`` (what it found, or why not: no libcupti, no driver, no device,
    another subscriber, ...)."""
    rows: list[dict[str, object]] = []
    for name, module in _hooks.BACKEND_MODULES.items():
        try:
            b = importlib.import_module(module).BACKEND
            ok, why = b.available()
            on = bool(b.default_on()) if ok else False
        except Exception as e:  # a broken optional backend is reported, never raised
            ok, why, on = False, f"cannot load {module}: {type(e).__name__}: {e}", False
        rows.append({"backend": name, "available": bool(ok), "default_on": on, "reason": str(why)})
    return pl.DataFrame(
        rows,
        schema={
            "backend": pl.String,
            "available": pl.Boolean,
            "default_on": pl.Boolean,
            "reason": pl.String,
        },
    )
