"""The environment a training script reads under `stallscope analyze`: which data to feed,
what to do with the page cache, how many steps to run, which files the dataset is made of."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from stallscope.exceptions import DataError

DATA_ENV: Final = "STALLSCOPE_DATA"
"""``synthetic``: replay batches from memory (no loading); ``real`` (the default): load."""
CACHE_ENV: Final = "STALLSCOPE_CACHE"
"""``cached``: read the declared dataset into the page cache first; ``cold``: evict it first;
unset: leave the page cache alone."""
STEPS_ENV: Final = "STALLSCOPE_STEPS"
"""Batches `stallscope.data.synthetic` yields in all (warm-up included); unset: no bound."""
DATASET_ENV: Final = "STALLSCOPE_DATASET"
"""The dataset's files or folders, separated by ``os.pathsep``."""
DROPPED_ENV: Final = "STALLSCOPE_CACHE_DROPPED"
"""Set by `stallscope analyze` when it dropped the whole page cache before a cold run."""

DATA_MODES: Final = ("synthetic", "real")
CACHE_MODES: Final = ("cached", "cold")


def data_mode() -> str:
    """``synthetic`` or ``real`` from STALLSCOPE_DATA (unset or empty: real)."""
    v = os.environ.get(DATA_ENV, "").strip().lower() or "real"
    if v not in DATA_MODES:
        raise DataError(
            f"{DATA_ENV}={os.environ[DATA_ENV]!r} is not a data mode: use one of "
            f"{', '.join(DATA_MODES)} (or leave it unset for real data)"
        )
    return v


def cache_mode() -> str | None:
    """``cached``, ``cold`` or None (leave the page cache alone) from STALLSCOPE_CACHE."""
    v = os.environ.get(CACHE_ENV, "").strip().lower()
    if not v:
        return None
    if v not in CACHE_MODES:
        raise DataError(
            f"{CACHE_ENV}={os.environ[CACHE_ENV]!r} is not a cache mode: use one of "
            f"{', '.join(CACHE_MODES)} (or leave it unset)"
        )
    return v


def step_budget() -> int | None:
    """STALLSCOPE_STEPS as a positive int, None when unset."""
    v = os.environ.get(STEPS_ENV, "").strip()
    if not v:
        return None
    if not v.isdigit() or int(v) < 1:
        raise DataError(f"{STEPS_ENV}={v!r} must be a whole number of steps >= 1")
    return int(v)


def declared_dataset() -> list[Path]:
    """The paths in STALLSCOPE_DATASET (none when unset)."""
    v = os.environ.get(DATASET_ENV, "")
    return [Path(p) for p in v.split(os.pathsep) if p.strip()]
