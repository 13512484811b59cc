"""stallscope.data.synthetic: steps, data waits and batch sizes recorded; replay from memory
when STALLSCOPE_DATA=synthetic; one step budget over every epoch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import stallscope
import stallscope.data as sd
from stallscope.data._synthetic import batch_samples


class Source:
    """A loader stand-in: counts the batches it made and whether its workers were stopped."""

    def __init__(self, n: int = 5, rows: int = 4) -> None:
        self.n, self.rows, self.made, self.stopped = n, rows, 0, 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        source = self

        class It:
            i = 0

            def __next__(self) -> tuple[np.ndarray, np.ndarray]:
                if self.i >= source.n:
                    raise StopIteration
                self.i += 1
                source.made += 1
                return np.full((source.rows, 2), source.made), np.arange(source.rows)

            def _shutdown_workers(self) -> None:
                source.stopped += 1

        return It()  # type: ignore[return-value]


def _events(tmp: Path) -> pl.DataFrame:
    return stallscope.load(tmp).sort("start_ns")


def test_real_data_passes_through_and_records_waits_steps_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sd.DATA_ENV, raising=False)
    monkeypatch.delenv(sd.STEPS_ENV, raising=False)
    src = Source(3)
    with stallscope.trace(tmp_path):
        got = [int(x[0, 0]) for x, _ in sd.synthetic(src)]
    assert got == [1, 2, 3] and src.made == 3
    ev = _events(tmp_path)
    assert ev.filter(pl.col("kind") == "data_wait").height == 4  # 3 batches + the end
    assert ev.filter(pl.col("kind") == "step").height == 3 + 1  # + the trace's closing one
    sizes = ev.filter(pl.col("name") == sd.SAMPLES_COUNTER)["value"].to_list()
    assert sizes == [4.0, 4.0, 4.0]
    assert stallscope.stall_table(ev).height == 3


def test_synthetic_replays_the_first_batches_and_stops_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sd.DATA_ENV, "synthetic")
    src = Source(100)
    with stallscope.trace(tmp_path):
        wrapped = sd.synthetic(src, replay=2, steps=7)
        assert len(wrapped) == 7
        got = [int(x[0, 0]) for x, _ in wrapped]
    assert got == [1, 2, 1, 2, 1, 2, 1]
    assert src.made == 2 and src.stopped == 1
    ev = _events(tmp_path)
    (mark,) = ev.filter(pl.col("name") == sd.REPLAY_MARK).to_dicts()
    assert mark["detail"] == "batches=2"
    first_step = ev.filter(pl.col("kind") == "step")["start_ns"].min()
    assert mark["start_ns"] <= first_step  # loaded before the first step
    # 7 steps closed by the wrapper's last marker, then the trace's tail window
    assert stallscope.stall_table(ev).height == 8


def test_the_budget_spans_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sd.DATA_ENV, "real")
    monkeypatch.setenv(sd.STEPS_ENV, "7")
    src = Source(3)
    wrapped = sd.synthetic(src)
    epochs = []
    for _ in range(5):
        epochs.append(len(list(wrapped)))
    assert epochs == [3, 3, 1, 0, 0]
    assert len(wrapped) == 0


def test_without_budget_len_is_the_loaders_and_synthetic_is_unsized(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(sd.STEPS_ENV, raising=False)
    monkeypatch.setenv(sd.DATA_ENV, "real")
    assert len(sd.synthetic(Source(5))) == 5
    monkeypatch.setenv(sd.DATA_ENV, "synthetic")
    with pytest.raises(TypeError, match="unbounded"):
        len(sd.synthetic(Source(5)))


def test_mark_steps_off_records_no_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sd.DATA_ENV, "real")
    with stallscope.trace(tmp_path):
        list(sd.synthetic(Source(2), mark_steps=False, steps=2))
    assert _events(tmp_path).filter(pl.col("kind") == "step").height == 0


def test_bad_arguments_and_empty_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="replay must be >= 1"):
        sd.synthetic([], replay=0)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        sd.synthetic([], steps=0)
    monkeypatch.setenv(sd.DATA_ENV, "synthetic")
    with pytest.raises(ValueError, match="no batch to replay"):
        list(sd.synthetic([]))


def test_batch_samples_finds_the_first_array() -> None:
    assert batch_samples((np.zeros((5, 3)), np.zeros(5))) == 5
    assert batch_samples({"ids": [np.float32(1), np.zeros((7, 1))]}) == 7  # first with a dim
    assert batch_samples([1, 2, "x"]) is None
