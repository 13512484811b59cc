"""Fixtures of the predictor's tests: the real Kineto trace sets (the repository's own, and the
shared sets beside the repository, skipped when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]  # the repository root
REPO_KINETO = ROOT / "tests" / "data" / "kineto"


def _shared_kineto() -> Path | None:
    env = os.environ.get("STALLSCOPE_KINETO_DATA")
    candidates = [Path(env)] if env else []
    candidates += [REPO_KINETO, *(p / "shared" / "data" / "kineto" for p in ROOT.parents)]
    for c in candidates:
        if (c / "MANIFEST.json").is_file():
            return c
    return None


@pytest.fixture(scope="session")
def kineto_sets() -> Path:
    """The folder of the five real Kineto trace sets (one sub-folder per set)."""
    d = _shared_kineto()
    if d is None:
        pytest.skip(
            "real Kineto traces not found: tests/data/kineto/MANIFEST.json, ../shared/data/kineto "
            "or $STALLSCOPE_KINETO_DATA"
        )
    return d
