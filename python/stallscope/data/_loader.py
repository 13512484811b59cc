"""A torch DataLoader whose batches carry how they were loaded (see _timing), recorded in the
main process as the fetch / prep split of each data wait."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from stallscope import _core
from stallscope.data import _timing


class TimedLoader:
    """Iterates like the torch DataLoader it holds (``.loader``), yielding the same batches;
    each batch's fetch and prep intervals (noted by the dataset, see `stallscope.data.fetched`)
    are recorded into the active trace with the main thread's wait for it. Use it as the
    DataLoader (``len``, ``.dataset``, ``.sampler`` for DistributedSampler.set_epoch)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    @property
    def dataset(self) -> Any:
        return self.loader.dataset

    @property
    def sampler(self) -> Any:
        return self.loader.sampler

    @property
    def batch_size(self) -> int | None:
        b = self.loader.batch_size
        return None if b is None else int(b)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        now = _core.now_ns
        _timing.forget()  # samples read outside the loader belong to no batch
        it = iter(self.loader)
        while True:
            began = now()
            try:
                item = next(it)
            except StopIteration:
                return
            if isinstance(item, _timing.TimedBatch):
                _timing.record(item, began, now())
                item = item.batch
            yield item


def loader(
    dataset: Any,
    batch_size: int,
    *,
    workers: int = 1,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = True,
    distributed: bool | None = None,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    **options: Any,
) -> TimedLoader:
    """A DataLoader over `dataset` with `workers` worker processes whose fetch and prep times
    reach the trace (`TimedLoader`). With `distributed` (default: when WORLD_SIZE > 1) each
    rank reads its own shard (DistributedSampler with RANK / WORLD_SIZE from the environment,
    no process group needed). `options` go to torch.utils.data.DataLoader."""
    from torch.utils.data import DataLoader, DistributedSampler
    from torch.utils.data import default_collate as torch_collate

    from stallscope.capture._env import placement

    where = placement()
    if distributed is None:
        distributed = where.world_size > 1
    sampler: Any = None
    if distributed:
        sampler = DistributedSampler(
            dataset,
            num_replicas=where.world_size,
            rank=where.rank,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
        )
    elif shuffle:
        import torch
        from torch.utils.data import RandomSampler

        sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(seed))
    dl = DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        drop_last=drop_last,
        collate_fn=_timing.TimedCollate(collate_fn or torch_collate),
        worker_init_fn=_timing.FreshWorker(options.pop("worker_init_fn", None)),
        **options,
    )
    return TimedLoader(dl)
