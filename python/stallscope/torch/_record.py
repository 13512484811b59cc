"""Recording collective, p2p and bucket events from Python into the core (any thread)."""

from __future__ import annotations

import threading

from stallscope import _core
from stallscope._schema import CATEGORY_ID, KIND_ID, format_detail

_ids: dict[str, int] = {}
_ids_lock = threading.Lock()


def intern(s: str) -> int:
    """Cached string id (the core's intern takes a lock; details repeat every step)."""
    v = _ids.get(s)
    if v is None:
        with _ids_lock:
            v = _ids.get(s)
            if v is None:
                v = _core.intern(s)
                _ids[s] = v
    return v


def record(
    kind: str,
    category: str,
    name: str,
    start_ns: int,
    end_ns: int,
    *,
    correlation: int = 0,
    nbytes: int = 0,
    lane: int = 0,
    detail: dict[str, object] | None = None,
    detail_text: str | None = None,
) -> bool:
    """One event into the calling thread's ring; `detail_text` (an already formatted detail
    string) saves formatting on hot paths."""
    if detail_text is None and detail:
        detail_text = format_detail(detail)
    # positional arguments: record() with keywords costs microseconds more per call
    return _core.record_event(
        KIND_ID[kind],
        CATEGORY_ID[category],
        intern(name),
        start_ns,
        end_ns,  # an end before the start is taken as the start
        correlation,
        nbytes,
        lane,
        intern(detail_text) if detail_text else 0,
    )
