"""Shared fixtures and the resource markers' skip rules (root, netns, torch)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KINETO_DATA = REPO / "tests" / "data" / "kineto"


def _is_root() -> bool:
    return os.geteuid() == 0


def _has_netns() -> bool:
    return _is_root() and shutil.which("ip") is not None and shutil.which("tc") is not None


_SKIPS = {
    "root": (_is_root, "needs root"),
    "netns": (_has_netns, "needs root with iproute2 (ip, tc) for network namespaces"),
    "torch": (
        lambda: importlib.util.find_spec("torch") is not None,
        "needs torch (pip install torch==2.13.0)",
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache: dict[str, bool] = {}
    for item in items:
        for marker, (check, reason) in _SKIPS.items():
            if marker in item.keywords:
                if marker not in cache:
                    cache[marker] = check()
                if not cache[marker]:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def kineto_data() -> Path:
    """The real Kineto traces kept in the repository: one folder per trace set, one file per
    rank, described by MANIFEST.json (tests/data/kineto/README.md)."""
    if not (KINETO_DATA / "MANIFEST.json").is_file():
        pytest.fail(f"{KINETO_DATA}/MANIFEST.json is missing: the checkout is incomplete")
    return KINETO_DATA
