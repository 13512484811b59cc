"""Data pipelines to measure, and the contract of the differential stall method.

The contract (what `stallscope analyze` needs from a training script)::

    import stallscope.data as sd

    files = sd.dataset_files("data/train")            # cached / cold runs prepare the page cache
    for x, y in sd.synthetic(loader):                 # STALLSCOPE_DATA=synthetic: replay batches
        ...                                           # steps and data waits are recorded

A script may instead read ``STALLSCOPE_DATA`` (``synthetic`` / ``real``, see `data_mode`) and
``STALLSCOPE_STEPS`` itself, and mark its steps with stallscope.step().

Two generated datasets with a loader whose workers report each sample's fetch (read) and prep
(decode and transform) time, so that the stall table splits the data stall into data_fetch and
data_prep: JPEG images (`write_images`, `ImageFiles`; Pillow: the ``data`` extra) and
memory-mapped token shards (`write_token_shards`, `TokenShards`); `loader` builds the torch
DataLoader (torch needed only there). Any dataset can report its times with `fetched` and
`prepared`.
"""

from __future__ import annotations

from stallscope.data._cache import CacheAction, drop_page_cache, evict, resident_fraction, warm
from stallscope.data._declare import CACHE_MARK, dataset_files
from stallscope.data._env import (
    CACHE_ENV,
    DATA_ENV,
    DATASET_ENV,
    STEPS_ENV,
    cache_mode,
    data_mode,
)
from stallscope.data._images import ImageFiles, write_images
from stallscope.data._loader import TimedLoader, loader
from stallscope.data._synthetic import REPLAY_MARK, SAMPLES_COUNTER, Synthetic, synthetic
from stallscope.data._timing import TimedBatch, TimedCollate, fetched, prepared
from stallscope.data._tokens import TokenShards, write_token_shards

__all__ = [
    "CACHE_ENV",
    "CACHE_MARK",
    "DATASET_ENV",
    "DATA_ENV",
    "REPLAY_MARK",
    "SAMPLES_COUNTER",
    "STEPS_ENV",
    "CacheAction",
    "ImageFiles",
    "Synthetic",
    "TimedBatch",
    "TimedCollate",
    "TimedLoader",
    "TokenShards",
    "cache_mode",
    "data_mode",
    "dataset_files",
    "drop_page_cache",
    "evict",
    "fetched",
    "loader",
    "prepared",
    "resident_fraction",
    "synthetic",
    "warm",
    "write_images",
    "write_token_shards",
]
