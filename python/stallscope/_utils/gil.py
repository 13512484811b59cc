"""Fair GIL hand-offs while stallscope's own calls run beside a busy Python thread.

stallscope's work runs in C++, NumPy and Polars, which release the GIL around each piece of work
and take it back after it. CPython gives the GIL to a waiting thread only once the thread that
holds it reaches a switch point, and a thread running Python bytecode is asked to let go only
after the switch interval (`sys.getswitchinterval()`, 5 ms by default). With another thread busy
in Python (a training loop beside an analysis thread, say), every return from native code
waited up to that long: on this project's 2-core VM the V100 trace's import took 1.3-1.8 s
instead of 37 ms, and its stall table 0.3 s instead of 3 ms (bench/README.md, "A busy Python
thread").

While a call wrapped by `fair_gil` runs, the interval is SWITCH_S (unless it is shorter
already): the import then took 98-109 ms, and the busy thread kept about 3/4 of its pace
meanwhile. The last wrapped call to return, in any thread, restores the interval it found,
unless someone set another one in between (theirs is kept). A process without other busy
threads sees no difference: the interval only matters when a thread waits for the GIL.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, ParamSpec, TypeVar

SWITCH_S: Final = 1e-4  # s: the switch interval while stallscope's calls run

_P = ParamSpec("_P")
_R = TypeVar("_R")

_lock = threading.Lock()
_active = 0  # wrapped calls running, in all threads
_saved: float | None = None  # the interval to restore; None: it was not changed


@contextmanager
def fair_handoffs() -> Iterator[None]:
    """The switch interval at most SWITCH_S inside the block (see the module's docstring)."""
    global _active, _saved
    with _lock:
        if _active == 0:
            found = sys.getswitchinterval()
            _saved = found if found > SWITCH_S else None
            if _saved is not None:
                sys.setswitchinterval(SWITCH_S)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                # Set to something else meanwhile: that setting stays. (CPython keeps the
                # interval in whole µs: what it reads back is not exactly SWITCH_S.)
                if abs(sys.getswitchinterval() - SWITCH_S) < 1e-7:
                    sys.setswitchinterval(_saved)
                _saved = None


def fair_gil(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """`fn` run inside `fair_handoffs()` (for the public entry points that do heavy work)."""

    @functools.wraps(fn)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with fair_handoffs():
            return fn(*args, **kwargs)

    return call
