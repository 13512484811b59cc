"""Fixtures of the predictor's tests: the repository's real Kineto trace sets."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository root
REPO_KINETO = ROOT / "tests" / "data" / "kineto"
