"""Files of one import read side by side (machines of 4+ cores): each by a scanner of its own,
whose dictionaries are merged into the import's afterwards. Forced here on any machine; the
result must be the one-scanner result, frame for frame, errors and declined files included."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import stallscope
from stallscope import TraceImportError
from stallscope.io.kineto import _native_read, read_kineto


@pytest.fixture
def side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """The side-by-side read, whatever the machine and the files' size (4 workers for 4+
    files)."""
    monkeypatch.setattr(_native_read, "_cores", lambda: 8)
    monkeypatch.setattr(_native_read, "_INLINE", 0)


def _one_scanner(paths: Any) -> Any:
    """read_kineto with one scanner (the 2-core path)."""
    mp = pytest.MonkeyPatch()
    mp.setattr(_native_read, "_cores", lambda: 2)
    try:
        return read_kineto(paths)
    finally:
        mp.undo()


def _event(rank: int, i: int, name: str, cat: str = "cpu_op", **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": rank,
        "tid": 1 + i % 3,
        "ts": 1000 + 7 * i,
        "dur": 3 + i % 5,
        "args": {"External id": i, **args},
    }


def _trace(path: Path, rank: int, events: list[dict[str, Any]]) -> Path:
    doc = {"distributedInfo": {"rank": rank, "world_size": 4}, "traceEvents": events}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _rank_files(tmp_path: Path) -> list[Path]:
    """Four ranks whose names, categories and args overlap only in part (each scanner's
    dictionaries give other codes to the same strings)."""
    files = []
    for r in range(4):
        events = [_event(r, i, f"op_{(i + r) % (5 + r)}") for i in range(40 + 30 * r)]
        events += [
            _event(r, 100 + i, f"kernel_{r}_{i % 3}", "kernel", stream=7, correlation=i + 1)
            for i in range(10)
        ]
        events.append(
            _event(r, 200, "cudaStreamSynchronize", "cuda_sync", cuda_sync_kind=f"sync_{r % 2}")
        )
        events.append(
            _event(
                r,
                201,
                "record_param_comms",
                **{"Collective name": ["allreduce", "broadcast"][r % 2], "dtype": "Float"},
                **{"In msg nelems": 16, "Group size": 4},
            )
        )
        # A launch and its kernel linked by ac2g flows only (no correlation in their args),
        # the flows first in some files and last in others (other codes for "ac2g").
        launch = {**_event(r, 300, "cudaLaunchKernel", "cuda_runtime"), "ts": 5000, "tid": 1}
        kernel = {**_event(r, 301, "gemm", "kernel", stream=7), "ts": 5010, "tid": 7}
        flows = [
            {"ph": "s", "id": 77, "pid": r, "tid": 1, "ts": 5000, "cat": "ac2g", "name": "ac2g"},
            {"ph": "f", "id": 77, "pid": r, "tid": 7, "ts": 5010, "cat": "ac2g", "name": "ac2g"},
        ]
        events = [*flows, *events] if r % 2 else [*events, *flows]
        events += [launch, kernel]
        files.append(_trace(tmp_path / f"rank{r}.json.gz", r, events))
    return files


@pytest.mark.usefixtures("side_by_side")
def test_merged_dictionaries_give_the_one_scanner_frame(tmp_path: Path) -> None:
    files = _rank_files(tmp_path)
    want = _one_scanner(tmp_path)
    got = read_kineto(tmp_path)
    assert got.events.equals(want.events)
    assert got.ranks == want.ranks
    assert got.events.filter(pl.col("kind") == "collective").height == 4
    assert set(got.events["name"].unique()) >= {"kernel_3_2", "op_7", "cudaStreamSynchronize"}
    linked = got.events.filter(pl.col("name").is_in(["cudaLaunchKernel", "gemm"]))
    assert linked["correlation"].to_list() == [77] * 8  # every rank's pair, through its flows
    # Several workers read: the order of the files given does not matter.
    assert read_kineto(list(reversed(files))).events.equals(want.events)


@pytest.mark.usefixtures("side_by_side")
def test_errors_and_declined_files_in_file_order(tmp_path: Path) -> None:
    files = _rank_files(tmp_path)
    # A float pid: the scanner declines the file; the general reader takes it.
    doc = json.loads(gzip.decompress(files[1].read_bytes()))
    doc["traceEvents"][0]["pid"] = 1.5
    files[1].write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert read_kineto(tmp_path).events.equals(_one_scanner(tmp_path).events)
    # A truncated file is named, also when a later file is broken too.
    files[2].write_bytes(files[2].read_bytes()[:-20])
    files[3].write_bytes(b"\x1f\x8b" + b"\x00" * 40)
    with pytest.raises(TraceImportError, match=r"rank2\.json\.gz: corrupt or truncated gzip"):
        read_kineto(tmp_path)


@pytest.mark.usefixtures("side_by_side")
@pytest.mark.parametrize("name", ["param_dlrm_8rank", "hta_sampled_2rank"])
def test_real_rank_folders(kineto_data: Path, name: str) -> None:
    folder = kineto_data / name
    assert stallscope.import_kineto(folder).equals(_one_scanner(folder).events)
