"""`stallscope.data.synthetic(loader)`: the one line a training script adds for the
differential stall method. It marks steps, records each wait for a batch, and, when
STALLSCOPE_DATA=synthetic, replays the first batches from memory instead of loading."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterable, Iterator
from typing import Any, Final

from stallscope import _core
from stallscope._schema import CATEGORY_ID, KIND_ID
from stallscope.capture._api import region
from stallscope.data._env import data_mode, step_budget

#: The counter recorded with every batch: the samples it holds (its first dimension).
SAMPLES_COUNTER: Final = "batch_samples"
#: The mark recorded once the replayed batches are in memory (detail: batches=N).
REPLAY_MARK: Final = "stallscope.data:synthetic"


def batch_samples(batch: Any) -> int | None:
    """The number of samples in `batch`: the first dimension of its first array or tensor
    (searching tuples, lists and dicts in order); None when it holds none."""
    stack = [batch]
    while stack:
        b = stack.pop(0)
        shape = getattr(b, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(b, dict):
            stack[:0] = list(b.values())
        elif isinstance(b, (tuple, list)):
            stack[:0] = list(b)
    return None


def _close(it: Iterator[Any]) -> None:
    """Stop a DataLoader iterator's worker processes now (not at garbage collection)."""
    shutdown = getattr(it, "_shutdown_workers", None)
    if callable(shutdown):
        with contextlib.suppress(Exception):
            shutdown()


class Synthetic:
    """What `synthetic` returns: iterate it like the loader (each ``for`` over it continues
    the same bounded sequence of batches: epochs share one step budget)."""

    def __init__(
        self,
        batches: Iterable[Any],
        replay: int,
        steps: int | None,
        mark_steps: bool,
        mode: str,
    ) -> None:
        self.batches = batches
        self.replay = replay
        self.steps = steps
        self.mark_steps = mark_steps
        self.mode = mode
        self.yielded = 0
        self._cache: list[Any] | None = None
        self._closed = False

    def __len__(self) -> int:
        """Batches the next ``for`` yields at most (the loader's length, bounded by what is
        left of the step budget). TypeError when neither bounds it."""
        sized = getattr(self.batches, "__len__", None)
        n = None if sized is None or self.mode == "synthetic" else int(sized())
        if self.steps is None:
            if n is None:
                raise TypeError("an unbounded batch stream has no length")
            return n
        left = max(self.steps - self.yielded, 0)
        return left if n is None else min(left, n)

    def _replayed(self) -> list[Any]:
        if self._cache is None:
            it = iter(self.batches)
            cache = []
            for _ in range(self.replay):
                try:
                    cache.append(next(it))
                except StopIteration:
                    break
            _close(it)
            del it
            if not cache:
                raise ValueError("the loader yielded no batch to replay")
            self._cache = cache
            t = _core.now_ns()
            detail = _core.intern(f"batches={len(cache)}")
            _core.record(
                KIND_ID["mark"],
                CATEGORY_ID["host"],
                _core.intern(REPLAY_MARK),
                t,
                t,
                detail_id=detail,
            )
        return self._cache

    def _source(self) -> Generator[Any, None, None]:
        if self.mode == "synthetic":
            cache = self._replayed()
            i = 0
            while True:
                yield cache[i % len(cache)]
                i += 1
        else:
            yield from self.batches

    def __iter__(self) -> Iterator[Any]:
        if self._closed:
            return
        wait = region("next_batch", "data", KIND_ID["data_wait"])
        now = _core.now_ns
        if self.mode == "synthetic":
            self._replayed()  # loaded before the first step
        source = self._source()
        try:
            while True:
                began = now()
                if self.steps is not None and self.yielded >= self.steps:
                    if self.mark_steps and self.yielded:
                        _core.step(began)  # the end of the last step
                    self._closed = True
                    return
                with wait:
                    try:
                        item = next(source)
                    except StopIteration:
                        return
                if self.mark_steps:
                    _core.step(began)
                n = batch_samples(item)
                if n is not None:
                    _core.counter(SAMPLES_COUNTER, float(n))
                self.yielded += 1
                yield item
        finally:
            if self._closed:
                source.close()  # a DataLoader iterator it holds stops its workers now


def synthetic(
    batches: Iterable[Any],
    *,
    replay: int = 2,
    steps: int | None = None,
    mark_steps: bool = True,
) -> Synthetic:
    """Wrap a training loop's loader for the differential stall method (`stallscope analyze`).

    With STALLSCOPE_DATA=synthetic, the first `replay` batches are loaded once (before the
    first step), the loader's workers are stopped, and those batches are yielded again and
    again from memory: the step time without any data loading. Otherwise (real data) the
    loader's batches pass through. Either way each wait for a batch is recorded as a data wait,
    each batch's size as the ``batch_samples`` counter, and (with `mark_steps`) a step
    boundary where each wait begins, plus one where the last step ends; do not also call
    stallscope.step() or wrap in stallscope.loader(..., mark_steps=True).

    `steps` (default: STALLSCOPE_STEPS, else unbounded) bounds the batches yielded in all,
    over every ``for`` loop over the result (epochs included). Replayed batches are the same
    objects each time: a loop must not modify its batches in place."""
    if replay < 1:
        raise ValueError(f"replay must be >= 1 batch, got {replay}")
    if steps is not None and steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    return Synthetic(
        batches, replay, steps if steps is not None else step_budget(), mark_steps, data_mode()
    )
