"""Shared fixtures: the real Kineto traces of ../shared/data/kineto (skipped when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]  # the repository root


def _kineto_data() -> Path | None:
    env = os.environ.get("STALLSCOPE_KINETO_DATA")
    candidates = [Path(env)] if env else []
    candidates += [p / "shared" / "data" / "kineto" for p in ROOT.parents]
    for c in candidates:
        if (c / "MANIFEST.json").is_file():
            return c
    return None


@pytest.fixture(scope="session")
def kineto_data() -> Path:
    """The folder of real Kineto traces (one sub-folder per trace set)."""
    d = _kineto_data()
    if d is None:
        pytest.skip(
            "real Kineto traces not found: ../shared/data/kineto (or $STALLSCOPE_KINETO_DATA)"
        )
    return d
