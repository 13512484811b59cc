"""_core.kineto_convert, the native importer's one-pass conversion, on hand-made rows: the
general converter's rules (steps, GPU lanes and devices, clipping, copies' bytes), the order
(rank, start, event index, file), one trace mark per file at its rank's first start, and the
rows of dropped categories (cat "Trace") left out."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope._schema import CATEGORY_ID, KIND_ID
from stallscope.io.kineto import _native, _native_read

pytestmark = pytest.mark.skipif(
    not _native_read.available(), reason="_core built without KinetoScanner, or msgspec missing"
)

NULL = _native.NULL
# cat codes: 0 cpu_op (region), 1 kernel, 2 gpu_memcpy, 3 Trace (dropped); name codes:
# 0 "aten::mm", 1 "ProfilerStep#7", 2 "ampere_sgemm", 3 "Memcpy HtoD"
CAT_KIND = np.array([KIND_ID[k] for k in ("region", "kernel", "memcpy", "region")], np.uint8)
CAT_DROP = np.array([0, 0, 0, 1], dtype=np.uint8)
NAME_STEP = np.array([NULL, 7, NULL, NULL], dtype=np.int64)
NAME_GPU = np.array([CATEGORY_ID[c] for c in ("compute", "compute", "compute", "memcpy")], np.uint8)


def _rows(*rows: dict[str, int]) -> dict[str, np.ndarray[Any, Any]]:
    keys32 = ("cat", "name", "sync_kind")
    keys64 = ("index", "ts_ns", "dur_ns", "pid", "tid", "stream", "device", "correlation")
    keys64 += ("bytes", "ext")
    out = {k: np.array([r.get(k, -1) for r in rows], dtype=np.int32) for k in keys32}
    out |= {k: np.array([r.get(k, NULL) for r in rows], dtype=np.int64) for k in keys64}
    return out


def _convert(
    rows: dict[str, np.ndarray[Any, Any]],
    ranks: list[int],
    sizes: list[int],
    cat_drop: np.ndarray[Any, Any] = CAT_DROP,
    threads: int = 2,
    cat_kind: np.ndarray[Any, Any] = CAT_KIND,
    links: bool = True,
    null_name: int = -1,
) -> Any:
    from stallscope import _core

    return _core.kineto_convert(
        rows,
        cat_kind,
        cat_drop,
        NAME_STEP,
        NAME_GPU,
        _native._KIND_GPU,
        _native._KIND_ORDER,
        ranks,
        [1000] * len(ranks),
        sizes,
        mark_cat0=4,
        mark_name=4,
        threads=threads,
        links=links,
        null_name=null_name,
    )


def test_rows_follow_the_general_converters_rules() -> None:
    rows = _rows(
        # a kernel: lane = stream, device from args, correlation kept
        dict(
            cat=1,
            name=2,
            index=0,
            ts_ns=50,
            dur_ns=5,
            pid=9,
            tid=3,
            stream=7,
            device=2,
            correlation=11,
        ),
        # a ProfilerStep region: kind step, correlation = the step number, host, device -1
        dict(cat=0, name=1, index=1, ts_ns=10, dur_ns=90, pid=9, tid=3, correlation=5),
        # a copy without stream or device: lane = tid, device = pid, bytes kept
        dict(cat=2, name=3, index=2, ts_ns=20, dur_ns=1, pid=4, tid=8, bytes=100),
        # a region with a null pid and an int64 tid: pid 0, lane clipped to int32
        dict(cat=0, name=0, index=3, ts_ns=30, dur_ns=2, tid=2**40, bytes=64),
    )
    out = _convert(rows, [0], [4])
    # the mark first (start = the rank's first start), then by start
    assert out["index"].tolist() == [-1, 1, 2, 3, 0]
    assert out["start_ns"].tolist() == [1010, 1010, 1020, 1030, 1050]
    assert out["end_ns"].tolist() == [1010, 1100, 1021, 1032, 1055]
    kinds = [KIND_ID[k] for k in ("mark", "step", "memcpy", "region", "kernel")]
    assert out["kind"].tolist() == kinds
    cats = [CATEGORY_ID[c] for c in ("host", "host", "memcpy", "host", "compute")]
    assert out["category"].tolist() == cats
    assert out["correlation"].tolist() == [0, 7, 0, 0, 11]
    assert out["lane"].tolist() == [0, 3, 8, 2**31 - 1, 7]
    assert out["device"].tolist() == [-1, -1, 4, -1, 2]
    assert out["pid"].tolist() == [0, 9, 4, 0, 9]
    assert out["bytes"].tolist() == [0, 0, 100, 0, 0]  # bytes count for copies only
    assert out["cat"].tolist()[0] == 4 and out["name"].tolist()[0] == 4  # the mark's codes
    assert out["out_row"].tolist() == [4, 1, 2, 3]  # input row -> output row
    assert out["file_row0"].tolist() == [1050]  # start of event 0


def test_ranks_sort_first_and_every_file_gets_a_mark() -> None:
    rows = _rows(
        dict(cat=0, name=0, index=0, ts_ns=5, dur_ns=1, pid=1, tid=1),  # file 0, rank 1
        dict(cat=0, name=0, index=4, ts_ns=9, dur_ns=1, pid=2, tid=2),  # file 1, rank 0
    )
    # file 2 (rank 2) kept no row: its mark sits at its base, and its row 0 is unknown
    out = _convert(rows, [1, 0, 2], [1, 1, 0])
    assert out["rank"].tolist() == [0, 0, 1, 1, 2]
    assert out["index"].tolist() == [-1, 4, -1, 0, -1]
    assert out["cat"].tolist() == [5, 0, 4, 0, 6]  # mark_cat0 + file number
    assert out["start_ns"].tolist() == [1009, 1009, 1005, 1005, 1000]
    assert out["file_row0"].tolist() == [1005, NULL, NULL]


def test_rows_of_dropped_categories_are_left_out() -> None:
    rows = _rows(
        dict(cat=3, name=0, index=0, ts_ns=1, dur_ns=99, pid=1, tid=1),  # Trace: dropped
        dict(cat=0, name=0, index=1, ts_ns=5, dur_ns=1, pid=1, tid=1),
        dict(cat=3, name=0, index=0, ts_ns=2, dur_ns=9, pid=1, tid=1),  # file 1: only a Trace
    )
    out = _convert(rows, [0, 1], [2, 1])
    assert out["rank"].tolist() == [0, 0, 1]  # rank 0: its mark and one row; rank 1: a mark
    assert out["index"].tolist() == [-1, 1, -1]
    assert out["start_ns"].tolist() == [1005, 1005, 1000]  # marks: first kept start, or base
    assert out["out_row"].tolist() == [-1, 1, -1]
    assert out["file_row0"].tolist() == [NULL, NULL]  # event 0 was dropped in both files
    assert out["file_kept"].tolist() == [1, 0]


def test_inconsistent_input_is_refused_not_read_out_of_bounds() -> None:
    rows = _rows(dict(cat=0, name=0, index=0, ts_ns=1, dur_ns=1))
    with pytest.raises(ValueError, match="wrong length"):
        _convert(rows, [0], [2])
    bad = _rows(dict(cat=9, name=0, index=0, ts_ns=1, dur_ns=1))
    with pytest.raises(ValueError, match="wrong size"):
        _convert(rows, [0], [1], cat_drop=CAT_DROP[:2])
    with pytest.raises(IndexError, match="outside its dictionary"):
        _convert(bad, [0], [1])
    # kind step comes from the step rule alone: a table saying otherwise is refused
    step_cat = CAT_KIND.copy()
    step_cat[0] = KIND_ID["step"]
    with pytest.raises(ValueError, match="not a category kind"):
        _convert(
            _rows(dict(cat=0, name=0, index=0, ts_ns=1, dur_ns=1)), [0], [1], cat_kind=step_cat
        )


def test_rows_without_a_name_take_the_null_name_code() -> None:
    # The scanner's -1 (no name) reads as the caller's code for "" in every rule that looks the
    # name up: the name column, a GPU row's category, the step rule.
    rows = _rows(
        dict(cat=1, name=-1, index=0, ts_ns=1, dur_ns=1, stream=7),  # a kernel without a name
        dict(cat=0, name=-1, index=1, ts_ns=2, dur_ns=1),  # a CPU op without one
        dict(cat=0, name=1, index=2, ts_ns=3, dur_ns=1),  # ProfilerStep#7
    )
    out = _convert(rows, [0], [3], null_name=3)  # code 3: "Memcpy HtoD" in these tables
    assert out["name"].tolist() == [4, 3, 3, 1]  # the mark (mark_name 4), then the rows
    assert out["category"].tolist()[1] == CATEGORY_ID["memcpy"]  # NAME_GPU[3]
    assert out["kind"].tolist()[2:] == [KIND_ID["region"], KIND_ID["step"]]
    assert out["correlation"].tolist()[3] == 7
    with pytest.raises(IndexError, match="outside its dictionary"):
        _convert(rows, [0], [3])  # no null code given: refused
    with pytest.raises(IndexError, match="outside its dictionary"):
        _convert(_rows(dict(cat=0, name=-2, index=0, ts_ns=1, dur_ns=1)), [0], [1], null_name=3)


def _random_rows(n: int, seed: int = 7) -> dict[str, np.ndarray[Any, Any]]:
    """n scanner rows of every kind of value; a quarter of them dropped (cat 3)."""
    rng = np.random.default_rng(seed)

    def pick(*values: int) -> np.ndarray[Any, Any]:
        return rng.choice(np.array(values, dtype=np.int64), n)

    return {
        "cat": rng.integers(0, 4, n).astype(np.int32),
        "name": rng.integers(0, 4, n).astype(np.int32),
        "sync_kind": rng.integers(-1, 3, n).astype(np.int32),
        "index": np.arange(n, dtype=np.int64),
        "ts_ns": rng.integers(0, 10**6, n),
        "dur_ns": rng.integers(0, 100, n),
        "pid": rng.integers(0, 3, n),
        "tid": rng.integers(0, 9, n),
        "stream": pick(NULL, 7),
        "device": pick(NULL, 0, 1),
        "correlation": np.where(rng.random(n) < 0.5, NULL, np.arange(n)),
        "bytes": pick(NULL, -5, 4096),
        "ext": np.where(rng.random(n) < 0.5, NULL, np.arange(n)),
    }


def _split(rows: dict[str, np.ndarray[Any, Any]], sizes: list[int]) -> list[dict[str, Any]]:
    """Each file's columns as a dict of its own (views into `rows`)."""
    bounds = np.cumsum([0, *sizes]).tolist()
    return [{k: v[a:b] for k, v in rows.items()} for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("shares", [[1.0], [0.5, 0.5], [0.4, 0.0, 0.25, 0.2, 0.15]])
def test_threads_write_what_one_writes(shares: list[float]) -> None:
    # One file: from kineto_convert_threads_min rows on, a second thread writes half of the
    # columns; from kineto_prefault_min on, a helper first faults the output's pages in while
    # the rows are sorted. Several files of a rank each: each thread converts whole files (up
    # to `threads` of them at once). Either way, and whether the files' columns come as one
    # dict or a dict per file, the output is the one thread's, byte for byte.
    from stallscope import _core

    n = 2 * max(_core.kineto_convert_threads_min, _core.kineto_prefault_min)
    rows = _random_rows(n)
    sizes = [int(n * s) for s in shares[:-1]]
    sizes.append(n - sum(sizes))
    ranks = list(range(len(sizes)))[::-1]  # rank order is not file order
    one = _convert(rows, ranks, sizes, threads=1)
    for threads in (2, 3, 8):
        for cols in (rows, _split(rows, sizes)):
            got = _convert(cols, ranks, sizes, threads=threads)  # type: ignore[arg-type]
            assert got.keys() == one.keys()
            for k in one:
                assert got[k].dtype == one[k].dtype, k
                assert np.array_equal(got[k], one[k]), (k, threads)
    # Without links (no NCCL collectives to place), the same columns less those three.
    for threads in (1, 2, 8):
        lean = _convert(rows, ranks, sizes, threads=threads, links=False)
        assert lean.keys() == one.keys() - {"index", "kind_order", "out_row"}
        for k in lean:
            assert np.array_equal(lean[k], one[k]), k


def test_an_error_on_a_converting_thread_reaches_the_caller() -> None:
    # A bad code in one file, converted on a thread of its own: the import gets the error,
    # once every thread has stopped (no thread left writing into freed columns).
    from stallscope import _core

    n = 2 * _core.kineto_convert_threads_min
    sizes = [n // 4] * 4
    files = _split(_random_rows(n), sizes)
    files[2]["cat"] = files[2]["cat"].copy()
    files[2]["cat"][-1] = 9  # no such category
    with pytest.raises(IndexError, match="outside its dictionary"):
        _convert(files, [0, 1, 2, 3], sizes, threads=4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a dict per file"):
        _convert(files[:3], [0, 1, 2, 3], sizes, threads=4)  # type: ignore[arg-type]


def test_converted_columns_reach_polars_without_a_copy_and_cannot_change_under_it() -> None:
    from stallscope._utils import arrow as _arrow

    rows = _rows(dict(cat=0, name=0, index=0, ts_ns=30, dur_ns=2, pid=1, tid=2))
    out = _convert(rows, [0], [1])
    start = out["start_ns"]
    assert not start.flags.writeable  # shared with the events frame: never written in place
    with pytest.raises(ValueError, match="read-only"):
        start[0] = 0
    s = _arrow.series(start)
    assert s.to_numpy().ctypes.data == start.ctypes.data  # the same memory
    copy = start.copy()  # writeable NumPy memory is copied
    assert _arrow.series(copy).to_numpy().ctypes.data != copy.ctypes.data
    del out, start
    assert s.to_list() == copy.tolist()  # the Series keeps the storage alive


def test_two_files_of_one_rank_interleave_by_start_then_index_then_file() -> None:
    # (an import with two files of one rank is refused later; the order is still defined)
    rows = _rows(
        dict(cat=0, name=0, index=0, ts_ns=7, dur_ns=1),  # file 0
        dict(cat=0, name=0, index=1, ts_ns=3, dur_ns=1),
        dict(cat=0, name=0, index=0, ts_ns=3, dur_ns=1),  # file 1
        dict(cat=0, name=0, index=1, ts_ns=7, dur_ns=1),
    )
    out = _convert(rows, [0, 0], [2, 2])
    # marks (index -1) first at the rank's first start, file 0's before file 1's
    assert out["cat"].tolist() == [4, 5, 0, 0, 0, 0]
    assert out["start_ns"].tolist() == [1003, 1003, 1003, 1003, 1007, 1007]
    assert out["index"].tolist() == [-1, -1, 0, 1, 0, 1]
    assert out["out_row"].tolist() == [4, 3, 2, 5]


@settings(max_examples=60, deadline=None)
@given(
    files=st.lists(
        st.tuples(
            st.integers(0, 3),  # rank (repeats: the general sort; none: the per-file sort)
            st.lists(st.integers(-(2**62), 2**62), max_size=40),  # ts per event
            st.sampled_from([1, 1000, 2**40]),  # ts spread: 1 to 4 radix passes
        ),
        min_size=1,
        max_size=4,
    )
)
def test_order_is_rank_start_index_file_for_any_starts(
    files: list[tuple[int, list[int], int]],
) -> None:
    ts: list[int] = []
    index: list[int] = []
    ranks, sizes = [], []
    for rank, values, spread in files:
        ranks.append(rank)
        sizes.append(len(values))
        ts += [v % spread if spread < 2**40 else v for v in values]  # ties when spread is small
        index += [2 * i for i in range(len(values))]
    n = len(ts)
    rows = _rows(*(dict(cat=0, name=0, index=index[i], ts_ns=ts[i], dur_ns=1) for i in range(n)))
    file_of = np.repeat(np.arange(len(files)), sizes)
    out = _convert(rows, ranks, sizes)
    # expected: every row, then each file's mark at its rank's first start (base if none)
    rank = np.concatenate([np.repeat(ranks, sizes), ranks]).astype(np.int64)
    start = np.array([1000 + v for v in ts], dtype=np.int64)
    first = {
        r: min((int(s) for s, rr in zip(start, rank[:n], strict=True) if rr == r), default=1000)
        for r in ranks
    }
    start = np.concatenate([start, [first[r] for r in ranks]])
    idx = np.concatenate([index, [-1] * len(files)])
    fil = np.concatenate([file_of, np.arange(len(files))])
    order = np.lexsort((fil, idx, start, rank))
    assert out["rank"].tolist() == rank[order].tolist()
    assert out["start_ns"].tolist() == start[order].tolist()
    assert out["index"].tolist() == idx[order].tolist()
    assert out["end_ns"][out["index"] >= 0].tolist() == (start[order][idx[order] >= 0] + 1).tolist()
    mark_cat = np.where(idx >= 0, 0, 4 + fil)
    assert out["cat"].tolist() == mark_cat[order].tolist()
    where = np.empty(len(order), dtype=np.int64)
    where[order] = np.arange(len(order))
    assert out["out_row"].tolist() == where[:n].tolist()


def test_freed_scan_columns_go_back_to_the_os_only_past_the_kept_amount(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Up to KEEP_FREED the freed heap stays for the analysis to reuse; a larger import's is
    # given back (malloc_trim), so a big trace does not leave hundreds of MiB held.
    from stallscope import _core

    calls: list[int] = []

    def trim() -> bool:
        calls.append(1)
        return True

    monkeypatch.setattr(_core, "trim_heap", trim)
    small = _native.KEEP_FREED // _native.SCAN_BYTES_PER_EVENT
    _native.trim_heap(small)
    assert calls == []
    _native.trim_heap(small + 1)
    assert calls == [1]


def _watch_scan_arrays(
    monkeypatch: pytest.MonkeyPatch, part: str, owner: Any, name: str
) -> tuple[list[Any], list[int]]:
    """Weak references to the arrays of each scanned file's `part` ("rows", "flows"), and the
    count of them still alive each time `owner.name` is called (after a gc.collect(): only
    references, not cycles, may keep an array)."""
    import gc
    import weakref

    alive: list[weakref.ref[Any]] = []
    end = _native_read.Session._end

    def watched_end(self: Any, path: Any, ok: bool) -> Any:
        fs = end(self, path, ok)
        alive.extend(weakref.ref(a) for a in fs.res[part].values())
        return fs

    seen: list[int] = []
    call = getattr(owner, name)

    def watched(*a: Any, **k: Any) -> Any:
        gc.collect()
        seen.append(sum(r() is not None for r in alive))
        return call(*a, **k)

    monkeypatch.setattr(_native_read.Session, "_end", watched_end)
    monkeypatch.setattr(owner, name, watched)
    return alive, seen


@pytest.mark.parametrize("files", [1, 3])
def test_scan_columns_are_freed_before_the_frame_is_built(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, files: int
) -> None:
    # The import's peak memory: the scan's columns (~90 bytes an event) must be gone before
    # the schema frame (names, details) is made, not held until the import returns. A single
    # file once kept them alive through the conversion's loop variable.
    import json

    import stallscope

    alive, seen = _watch_scan_arrays(monkeypatch, "rows", _native, "_schema_frame")
    for f in range(files):
        events = [
            {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
            for i in range(50)
        ]
        doc = {"distributedInfo": {"rank": f}, "traceEvents": events}
        (tmp_path / f"rank{f}.json").write_text(json.dumps(doc))
    out = stallscope.import_kineto(tmp_path)
    assert out.height == 51 * files  # 50 events and a trace mark per file: read natively
    assert len(alive) == 13 * files  # the scanner's columns, watched
    assert seen == [0]


def test_flows_are_freed_before_the_conversion_allocates(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ac2g flows (two per kernel launch) are read once, to link rows without a correlation;
    # held through kineto_convert they would add to the import's peak, which sets how many
    # fresh pages the import faults in.
    import json

    import stallscope
    from stallscope import _core

    alive, seen = _watch_scan_arrays(monkeypatch, "flows", _core, "kineto_convert")
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10, "dur": 5},
        {"ph": "s", "cat": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 10, "name": "ac2g"},
        {"ph": "f", "cat": "ac2g", "id": 7, "pid": 0, "tid": 3, "ts": 20, "name": "ac2g",
         "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 3, "ts": 20, "dur": 4,
         "args": {"stream": 3, "device": 0}},
    ]  # fmt: skip
    (tmp_path / "rank0.json").write_text(json.dumps({"traceEvents": events}))
    out = stallscope.import_kineto(tmp_path)
    assert len(alive) == 5  # pid, tid, ts, id, cat: watched
    assert seen == [0]
    # The flows did their work first: the kernel and its launch share correlation 7.
    assert sorted(out.filter(out["kind"].is_in(["kernel", "runtime"]))["correlation"]) == [7, 7]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=60))
def test_cat_counts_are_rows_and_rows_without_a_correlation_per_code(
    rows: list[tuple[int, bool]],
) -> None:
    # What the per-file work reads instead of two NumPy passes: unknown categories are counted
    # from the first, and ac2g flows are linked only where the second finds a linked category.
    from stallscope import _core

    cat = np.array([c for c, _ in rows], dtype=np.int32)
    corr = np.array([NULL if none else 1 for _, none in rows], dtype=np.int64)
    per_cat, no_corr = _core.kineto_cat_counts(cat, corr, 6)
    assert per_cat.tolist() == np.bincount(cat, minlength=6).tolist()
    assert no_corr.tolist() == np.bincount(cat[corr == NULL], minlength=6).tolist()


def test_cat_counts_refuse_codes_outside_the_table() -> None:
    from stallscope import _core

    corr = np.zeros(2, dtype=np.int64)
    with pytest.raises(IndexError, match="outside its table"):
        _core.kineto_cat_counts(np.array([0, 3], dtype=np.int32), corr, 3)
    with pytest.raises(IndexError, match="outside its table"):
        _core.kineto_cat_counts(np.array([0, -1], dtype=np.int32), corr, 3)
    with pytest.raises(ValueError, match="differ in length"):
        _core.kineto_cat_counts(np.zeros(3, dtype=np.int32), corr, 3)
