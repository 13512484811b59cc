"""record_event: the positional fast path into the core (the torch instrumentation's)."""

from __future__ import annotations

from pathlib import Path

import pytest

import stallscope
from stallscope import _core
from stallscope._schema import CATEGORY_ID, KIND_ID


def test_record_event_records_one_host_event(tmp_path: Path) -> None:
    name, detail = _core.intern("all_reduce"), _core.intern("group=g;async=0")
    coll, comm = KIND_ID["collective"], CATEGORY_ID["comm"]
    assert not _core.record_event(coll, comm, name, 10, 20, 3, 64, 7, detail)  # not recording
    with stallscope.trace(tmp_path):
        assert _core.record_event(coll, comm, name, 100, 250, 3, 64, 7, detail)
        assert _core.record_event(coll, comm, name, 300, 200, 4, 0, 7, 0)  # end before start
    ev = stallscope.load(tmp_path).sort("start_ns").to_dicts()
    assert len(ev) == 2
    a, b = ev
    assert (a["kind"], a["category"], a["name"]) == ("collective", "comm", "all_reduce")
    assert (a["start_ns"], a["end_ns"], a["correlation"], a["bytes"]) == (100, 250, 3, 64)
    assert (a["lane"], a["device"], a["detail"]) == (7, -1, "group=g;async=0")
    assert (b["start_ns"], b["end_ns"], b["detail"]) == (300, 300, None)


def test_record_event_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="record_event"):
        _core.record_event(1, 2, 3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="out of range"):
        _core.record_event(99, 0, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="out of range"):
        _core.record_event(0, 0, -1, 0, 0, 0, 0, 0, 0)
    with pytest.raises(TypeError):
        _core.record_event(0, 0, 0, "now", 0, 0, 0, 0, 0)  # type: ignore[arg-type]
