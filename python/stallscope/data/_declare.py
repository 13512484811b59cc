"""`stallscope.data.dataset_files(...)`: a training script names the files its dataset reads,
so that a cached run finds them in memory and a cold run on disk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from stallscope import _core
from stallscope._schema import CATEGORY_ID, KIND_ID
from stallscope.data._cache import CacheAction, evict, expand, warm
from stallscope.data._env import DROPPED_ENV, cache_mode, declared_dataset

#: The mark recorded with what was done to the page cache (detail: CacheAction.detail()).
CACHE_MARK: Final = "stallscope.data:cache"


def dataset_files(*paths: str | os.PathLike[str]) -> list[Path]:
    """Declare the dataset's files (files or folders; STALLSCOPE_DATASET's paths are added)
    and return them, sorted. Under `stallscope analyze` (STALLSCOPE_CACHE set) this also
    prepares the page cache before training starts: ``cached`` reads every file through,
    ``cold`` evicts every file (fdatasync + posix_fadvise DONTNEED, in addition to dropping the
    whole page cache when analyze ran as root). What was done, and the fraction of the files'
    pages resident before and after, is recorded as a ``stallscope.data:cache`` mark.

    Call it before the loader starts reading (before the first batch), in every rank."""
    files = expand([*paths, *declared_dataset()])
    mode = cache_mode()
    action: CacheAction | None = None
    if mode == "cached":
        action = warm(files)
    elif mode == "cold":
        dropped = os.environ.get(DROPPED_ENV, "") == "drop_caches"
        action = evict(files, "drop_caches" if dropped else "fadvise")
    if action is not None and _core.recording():
        t = _core.now_ns()
        _core.record(
            KIND_ID["mark"],
            CATEGORY_ID["host"],
            _core.intern(CACHE_MARK),
            t,
            t,
            bytes=action.bytes,
            detail_id=_core.intern(action.detail()),
        )
    return files
