"""The recording calls of the public API: region, step, mark, counter, loader."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from stallscope import _core
from stallscope._schema import KIND_ID

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

step = _core.step
mark = _core.mark
counter = _core.counter


class region(_core.Region):  # noqa: N801 - used like a function: stallscope.region("fwd")
    """A named CPU region, as a context manager or a decorator::

        with stallscope.region("forward", category="compute"):
            ...

        @stallscope.region("optimizer", category="compute")
        def step_optimizer(): ...

    `category` is one of host (default), compute, memcpy, comm, data, data_fetch, data_prep,
    sync, other. A region object can be kept and re-entered (also nested and from several
    threads): enter + exit cost two clock reads and one ring push. Regions nest up to 256 deep
    per thread; deeper exits are counted in run.json's drops, not recorded.
    """

    __slots__ = ()

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def loader(
    batches: Iterable[T],
    name: str = "next_batch",
    category: str = "data",
    *,
    mark_steps: bool = False,
) -> Iterator[T]:
    """Yield from `batches` (a DataLoader, any iterable), recording each wait for the next item
    as a ``data_wait`` event: the data stall of the step that waits. With `mark_steps`, a step
    boundary is marked where each wait begins, so each step starts by fetching its batch (then
    do not call stallscope.step() yourself), and the last step ends where the loop ends: when
    it asks for a batch past the end of the data, or stops iterating (break, islice; the
    loader's teardown, e.g. a DataLoader joining its worker processes, is then in no step)."""
    from stallscope.capture import _trace

    wait = region(name, category, KIND_ID["data_wait"])
    it = iter(batches)
    now = _core.now_ns
    marked_in: _trace.Trace | None = None  # the trace this loader marked steps in
    end_at: int | None = None
    try:
        while True:
            began = now()
            with wait:
                try:
                    item = next(it)
                except StopIteration:
                    end_at = began  # the last step ended when it asked for one more batch
                    return
            if mark_steps:
                step(began)
                marked_in = _trace.active()
            yield item
    finally:
        if marked_in is not None and marked_in is _trace.active():
            marked_in.end_steps(now() if end_at is None else end_at)
