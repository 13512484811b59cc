from __future__ import annotations

from collections.abc import Iterator

import pytest

from stallscope import _core


@pytest.fixture
def small_pool() -> Iterator[None]:
    """Recording on, straight into a pool of tiny rings (no Trace, no writer thread)."""
    assert not _core.recording(), "a trace is still recording from an earlier test"
    _core.configure(4, 16)
    _core.discard()
    _core.reset_stats()
    _core.set_recording(True)
    try:
        yield
    finally:
        _core.set_recording(False)
        _core.discard()
