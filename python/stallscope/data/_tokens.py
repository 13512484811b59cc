"""A generated token-shard dataset: .npy files of token ids, memory-mapped, read as windows of
``seq_len + 1`` tokens (input and next-token target). Fetch is the copy of a window out of the
mapping (the page faults that read it from disk or the page cache); prep turns it into the
int64 input and target arrays."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import numpy as np

from stallscope import _core
from stallscope.data import _timing
from stallscope.data._generated import generate, require
from stallscope.exceptions import DataError

SHARD: Final = "shard-{:05d}.npy"


def write_token_shards(
    root: str | os.PathLike[str],
    *,
    shards: int = 4,
    tokens_per_shard: int = 1 << 20,
    vocab: int = 4096,
    seed: int = 0,
) -> Path:
    """Write `shards` files of `tokens_per_shard` token ids (uint16 below 65,536 ids, else
    uint32) under `root`, unless it already holds exactly this dataset (every rank may call
    it at once). Ids follow a Zipf-like law, as words do. Returns `root`."""
    if shards < 1 or tokens_per_shard < 2 or not 2 <= vocab <= 1 << 31:
        raise DataError(
            f"token shards: shards {shards} >= 1, tokens_per_shard {tokens_per_shard} >= 2 "
            f"and vocab {vocab} in 2..2^31 are needed"
        )
    meta = {
        "kind": "tokens",
        "shards": shards,
        "tokens_per_shard": tokens_per_shard,
        "vocab": vocab,
        "seed": seed,
    }

    def write(folder: Path) -> None:
        rng = np.random.default_rng(seed)
        dtype = np.uint16 if vocab <= 1 << 16 else np.uint32
        for i in range(shards):
            ids = (rng.zipf(1.2, tokens_per_shard) - 1) % vocab
            np.save(folder / SHARD.format(i), ids.astype(dtype))

    return generate(Path(root), meta, write)


class TokenShards:
    """The windows of a `write_token_shards` folder as a map-style dataset of (input, target):
    int64 arrays of `seq_len` tokens, the target shifted by one. Windows do not overlap and do
    not cross shards; the shards are memory-mapped once per process (in each worker after it
    starts)."""

    def __init__(self, root: str | os.PathLike[str], seq_len: int = 128) -> None:
        self.root = Path(root)
        meta = require(self.root, "tokens", "write_token_shards")
        self.shards = [self.root / SHARD.format(i) for i in range(int(meta["shards"]))]
        per = int(meta["tokens_per_shard"])
        if not 1 <= seq_len < per:
            raise DataError(f"seq_len {seq_len} must be 1..{per - 1} (tokens per shard - 1)")
        self.seq_len = seq_len
        self.per_shard = per // (seq_len + 1)
        self._maps: dict[int, Any] = {}
        self._pid = -1

    def __len__(self) -> int:
        return self.per_shard * len(self.shards)

    def files(self) -> list[Path]:
        """Every file a pass over the dataset reads (for stallscope.data.dataset_files)."""
        return list(self.shards)

    def _map(self, shard: int) -> Any:
        if self._pid != os.getpid():  # a forked worker maps the files anew
            self._maps, self._pid = {}, os.getpid()
        m = self._maps.get(shard)
        if m is None:
            m = self._maps[shard] = np.load(self.shards[shard], mmap_mode="r")
        return m

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        if not 0 <= i < len(self):
            raise IndexError(f"window {i} of {len(self)}")
        shard, k = divmod(i, self.per_shard)
        a = k * (self.seq_len + 1)
        now = _core.now_ns
        t0 = now()
        window = np.array(self._map(shard)[a : a + self.seq_len + 1])  # copy: reads the pages
        t1 = now()
        x = window[:-1].astype(np.int64)
        y = window[1:].astype(np.int64)
        t2 = now()
        _timing.fetched(t0, t1, window.nbytes)
        _timing.prepared(t1, t2)
        return x, y
