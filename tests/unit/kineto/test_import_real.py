"""import_kineto on the real traces of tests/data/kineto: ranks, metadata, kinds, exact
timestamps, steps, collectives, all in stallscope's event schema."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import stallscope
from stallscope._schema import SCHEMA
from stallscope._schema._classify import gpu_category
from stallscope.analysis import collectives


def _read(path: Path | list[Path]) -> stallscope.KinetoImport:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the real traces import without a single problem
        return stallscope.read_kineto(path)


def test_every_trace_set_imports_with_manifest_ranks(kineto_data: Path) -> None:
    manifest = json.loads((kineto_data / "MANIFEST.json").read_text())
    for name, entry in manifest.items():
        imp = _read(kineto_data / name)
        want = {f["rank"] for f in entry["files"].values()}
        assert set(imp.ranks) == want, name
        assert imp.world_size == next(iter(entry["files"].values()))["world_size"]
        assert dict(imp.events.schema) == SCHEMA
        for fname, f in entry["files"].items():
            meta = imp.ranks[f["rank"]]
            assert meta.path.name == fname
            assert sorted({d.get("name") for d in meta.device_properties}) == sorted(f["gpu"])
        assert sorted(imp.events["rank"].unique().to_list()) == sorted(want)


def test_kinds_lanes_and_categories(kineto_data: Path) -> None:
    ev = _read(kineto_data / "hta_v100_rank1_of2_large").events
    counts = dict(ev.group_by("kind").len().iter_rows())
    # From the file: 19370 kernels, 2040 memcpy, 880 memset, 42373 runtime calls, 5 steps.
    assert counts["kernel"] == 19370
    assert counts["memcpy"] == 2040
    assert counts["memset"] == 880
    assert counts["runtime"] == 42373
    assert counts["step"] == 5
    gpu = ev.filter(pl.col("kind") == "kernel")
    assert gpu["device"].unique().to_list() == [1]
    assert set(gpu["lane"].unique().to_list()) >= {7, 14}  # streams
    # The one shared classifier decides GPU categories: 2020 NCCL AllReduce kernels are comm.
    assert gpu.filter(pl.col("category") == "comm").height == 2020
    assert gpu.select(
        (pl.col("category").cast(pl.String) == gpu_category(pl.col("name"))).all()
    ).item()
    steps = ev.filter(pl.col("kind") == "step").sort("start_ns")
    assert steps["correlation"].to_list() == [2, 3, 4, 5, 6]
    assert steps["name"].to_list() == [f"ProfilerStep#{i}" for i in range(2, 7)]
    host = ev.filter(pl.col("kind").is_in(["region", "runtime"]))
    assert (host["device"] == -1).all()


def test_base_time_and_float_ns_timestamps_are_exact(kineto_data: Path) -> None:
    imp = _read(kineto_data / "hta_a100_rank0_of2_ncclmeta")
    meta = imp.ranks[0]
    assert meta.base_ns == 1711964646000000000
    assert meta.ts_float
    assert meta.distributed_info["nccl_version"] == "2.17.1"
    assert meta.distributed_info["pg_config"][0]["ranks"] == [0, 1]
    ev = imp.events
    # "ts": 4458676602730.476, "dur": 7.523 (µs) -> exact ns on the base.
    row = ev.filter((pl.col("kind") == "runtime") & (pl.col("correlation") == 33556)).row(
        0, named=True
    )
    assert row["start_ns"] == 1711964646000000000 + 4458676602730476
    assert row["end_ns"] - row["start_ns"] == 7523
    assert row["name"] == "cudaLaunchKernel"


def test_collectives_from_nccl_metadata(kineto_data: Path) -> None:
    ev = _read(kineto_data / "hta_a100_rank0_of2_ncclmeta").events
    coll = collectives(ev).collect()
    assert coll.height > 0
    allreduce = coll.filter(pl.col("name") == "allreduce")
    assert allreduce.height > 0
    assert set(allreduce["group"].to_list()) == {"0:0,1"}
    assert (allreduce["group_size"] == 2).all()
    # seq numbers are 0..n-1 within the group
    assert sorted(coll.filter(pl.col("group") == "0:0,1")["seq"].to_list()) == list(
        range(coll.filter(pl.col("group") == "0:0,1").height)
    )
    # bytes = In msg nelems x the dtype's size: the first allreduce is 2049000 floats.
    assert allreduce.sort("start_ns")["bytes"][0] == 2049000 * 4
    # Timed by the NCCL kernel each one launched (a GPU interval, not the CPU enqueue call).
    kernels = ev.filter((pl.col("kind") == "kernel") & (pl.col("category") == "comm"))
    starts = set(kernels["start_ns"].to_list())
    assert sum(s in starts for s in allreduce["start_ns"].to_list()) >= allreduce.height // 2


def test_several_files_and_folder_agree(kineto_data: Path) -> None:
    folder = kineto_data / "param_dlrm_8rank"
    files = sorted(folder.glob("*.gz"))
    a = _read(folder).events
    b = _read(files).events
    assert a.equals(b)
    one = _read(files[3]).events
    assert one["rank"].unique().to_list() == [3]


def test_a_folder_converted_a_file_per_thread_gives_the_one_thread_events(
    kineto_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folders of enough rows are converted a file per thread where there are cores for it:
    two ranks of the A100 NCCL trace (27 k rows each, NCCL collectives placed among them)
    give, row for row, the events one thread gives."""
    import gzip

    import orjson

    from stallscope import _core
    from stallscope.io.kineto import _native

    trace = kineto_data / "hta_a100_rank0_of2_ncclmeta" / "nccl_data.json.gz"
    doc = orjson.loads(gzip.decompress(trace.read_bytes()))
    for rank in (0, 1):
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": rank}
        (tmp_path / f"rank{rank}.json").write_bytes(orjson.dumps(doc))
    monkeypatch.setattr(_native, "_cores", lambda: 4)
    per_file = _read(tmp_path).events
    monkeypatch.setattr(_native, "CONVERT_THREADS_MAX", 1)
    one = _read(tmp_path).events
    assert per_file.height > _core.kineto_convert_threads_min
    assert per_file.equals(one)
    coll = per_file.filter(pl.col("kind") == "collective")
    assert sorted(coll["rank"].unique().to_list()) == [0, 1]


def test_every_rank_has_one_trace_mark_with_facts(kineto_data: Path) -> None:
    ev = _read(kineto_data / "hta_sampled_2rank").events
    marks = ev.filter(pl.col("name") == stallscope.io.kineto.TRACE_MARK)
    assert marks.height == 2
    assert marks["detail"].str.contains("world_size=128").all()


@pytest.mark.parametrize("name", ["hta_a100_rank0_of16", "param_dlrm_8rank"])
def test_times_are_ordered_and_nonnegative(kineto_data: Path, name: str) -> None:
    ev = _read(kineto_data / name).events
    assert (ev["end_ns"] >= ev["start_ns"]).all()
    assert ev["start_ns"].min() > 1_600_000_000 * 10**9  # absolute epoch ns (2020+)


@pytest.mark.parametrize("name", ["hta_a100_rank0_of2_ncclmeta", "param_dlrm_8rank"])
def test_every_reader_gives_the_same_events(
    kineto_data: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """msgspec reader (when installed), Polars' JSON reader, and the orjson reader agree."""
    from stallscope.io.kineto import _parse

    fast = _read(kineto_data / name).events
    monkeypatch.setattr(_parse, "parse_fast", lambda holder, path: None)
    polars_reader = _read(kineto_data / name).events
    assert polars_reader.equals(fast)
    monkeypatch.setattr(_parse, "FAST_SCHEMA", {"traceEvents": pl.Int64()})  # forces orjson
    orjson_reader = _read(kineto_data / name).events
    assert orjson_reader.equals(fast)


def test_the_detail_thread_gives_the_inline_detail_and_raises_its_errors(
    kineto_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large imports write the detail column on a second thread (more on machines of more
    cores): the same column, and an error in making it reaches the caller instead of being lost
    with the thread."""
    from stallscope import _core
    from stallscope.io.kineto import _native

    path = kineto_data / "param_dlrm_8rank"
    inline = _read(path).events
    monkeypatch.setattr(_native, "DETAIL_THREAD_MIN", 0)
    assert _read(path).events.equals(inline)
    # Eight cores: seven threads take the parts (8192 rows each) the caller does not.
    monkeypatch.setattr(_native, "_cores", lambda: 8)
    monkeypatch.setattr(_native, "DETAIL_ROWS_PER_THREAD", 1)
    assert _read(path).events.equals(inline)
    job = _core.kineto_detail(
        np.zeros(1, np.int32), ["a"], np.zeros(1, np.int64), np.full(1, -1, np.int32), []
    )
    with pytest.raises(ValueError, match="1 thread or more"):
        job.start(0)

    def broken(*args: object) -> object:
        raise IndexError("kineto_detail: a code past its table's end")

    monkeypatch.setattr(_core, "kineto_detail", broken)
    with pytest.raises(IndexError, match="past its table"):
        _read(path)
