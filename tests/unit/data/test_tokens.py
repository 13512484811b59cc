"""The generated token-shard dataset: memory-mapped windows of next-token pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stallscope.data as sd
from stallscope.data import _timing
from stallscope.exceptions import DataError


def test_windows_are_next_token_pairs_within_shards(tmp_path: Path) -> None:
    root = sd.write_token_shards(tmp_path / "tok", shards=2, tokens_per_shard=1000, vocab=300)
    shards = sorted(root.glob("shard-*.npy"))
    assert len(shards) == 2
    ids = np.load(shards[1])
    assert ids.dtype == np.uint16 and ids.shape == (1000,) and int(ids.max()) < 300
    ds = sd.TokenShards(root, seq_len=9)
    assert len(ds) == 2 * 100 and ds.files() == shards
    _timing._pending.clear()
    x, y = ds[100 + 3]  # shard 1, window 3: tokens 30..39
    assert x.dtype == np.int64 and x.shape == y.shape == (9,)
    assert x.tolist() == ids[30:39].tolist() and y.tolist() == ids[31:40].tolist()
    fetch, prep = list(_timing._pending)
    assert fetch[0] and fetch[3] == 10 * 2 and not prep[0]
    with pytest.raises(IndexError):
        ds[200]


def test_large_vocab_uses_uint32_and_bad_input_is_named(tmp_path: Path) -> None:
    root = sd.write_token_shards(tmp_path / "big", shards=1, tokens_per_shard=50, vocab=70000)
    assert np.load(next(root.glob("*.npy"))).dtype == np.uint32
    with pytest.raises(DataError, match=r"seq_len 50 must be 1\.\.49"):
        sd.TokenShards(root, seq_len=50)
    with pytest.raises(DataError, match="shards 0 >= 1"):
        sd.write_token_shards(tmp_path / "x", shards=0)
    with pytest.raises(DataError, match="write_token_shards"):
        sd.TokenShards(tmp_path / "missing")
