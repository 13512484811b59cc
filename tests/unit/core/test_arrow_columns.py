"""Columns handed to Polars through the Arrow C data interface (csrc/arrow, stallscope._utils.arrow):
the same values as Polars' own NumPy constructor, string gathers with nulls, the Kineto detail
column, ownership (a Series outlives the ArrowColumn it came from), and clear errors."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stallscope import _core
from stallscope._utils import arrow as _arrow

NULL = np.iinfo(np.int64).min
DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
DTYPES += [np.float32, np.float64, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_numeric_columns_equal_polars_own_constructor(dtype: type, data: st.DataObject) -> None:
    a = data.draw(hnp.arrays(dtype, st.integers(0, 70)))
    got = _arrow.series(a, "x")
    want = pl.Series("x", a)
    assert got.dtype == want.dtype
    assert got.name == "x"
    assert got.null_count() == 0
    assert got.equals(want, check_names=True) or (
        # NaN != NaN for equals(); compare bit patterns of float columns instead
        a.dtype.kind == "f" and np.array_equal(got.to_numpy(), a, equal_nan=True)
    )


def test_numeric_views_slices_and_byte_order_are_copied_as_values() -> None:
    a = np.arange(20, dtype=np.int64)
    assert _arrow.series(a[::3]).to_list() == a[::3].tolist()  # not contiguous: copied first
    big_endian = a.astype(">i4")
    assert _arrow.series(big_endian).to_list() == a.tolist()
    assert _arrow.series(a, dtype=pl.Int32).dtype == pl.Int32


def test_a_series_outlives_its_arrow_column() -> None:
    a = np.arange(1000, dtype=np.float64)
    col = _core.arrow_numeric(a)
    s = pl.Series(col)
    del col, a
    gc.collect()
    assert s.sum() == sum(range(1000))
    t = pl.Series(_core.arrow_strings(["a string longer than twelve bytes"], np.zeros(3, int)))
    gc.collect()
    assert t.to_list() == ["a string longer than twelve bytes"] * 3


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=100, deadline=None)
@given(
    cats=st.lists(TEXT, min_size=1, max_size=40, unique=True),
    picks=st.lists(st.integers(0, 39), max_size=80),
)
def test_enum_columns_equal_polars_own_enum(cats: list[str], picks: list[int]) -> None:
    codes = np.array([p % len(cats) for p in picks], dtype=np.uint8)
    dtype = pl.Enum(cats)
    got = _arrow.enum(codes, cats, dtype, "e")
    want = pl.Series("e", [cats[c] for c in codes], dtype=dtype)
    assert got.dtype == dtype
    assert got.name == "e"
    assert got.null_count() == 0
    assert got.equals(want, check_names=True)
    assert got.to_physical().to_list() == codes.tolist()


def test_enum_columns_share_read_only_codes_and_outlive_them() -> None:
    # kineto_convert's kind codes: the extension's read-only storage, shared with the column.
    from stallscope._schema import KIND, KINDS

    codes = np.arange(len(KINDS) * 3, dtype=np.uint8) % len(KINDS)
    col = _core.arrow_enum(codes, list(KINDS), "kind")
    s = pl.Series(col)
    del col, codes
    gc.collect()
    assert s.dtype == KIND
    assert s.to_list() == list(KINDS) * 3
    assert s.filter(s == "kernel").len() == 3  # compares as an Enum, not as strings


def test_enum_columns_fall_back_to_a_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Polars that does not read the dictionary column as this Enum: the gather instead.
    monkeypatch.setattr(_core, "arrow_enum", lambda c, cats, name: _core.arrow_numeric(c, name))
    cats = ["a", "b", "c"]
    got = _arrow.enum(np.array([2, 0, 1], np.uint8), cats, pl.Enum(cats), "x")
    assert got.dtype == pl.Enum(cats)
    assert got.to_list() == ["c", "a", "b"]


@settings(max_examples=200, deadline=None)
@given(
    table=st.lists(TEXT, max_size=12),
    picks=st.lists(st.integers(-3, 11), max_size=60),
)
def test_strings_gather_by_code_with_nulls(table: list[str], picks: list[int]) -> None:
    codes = np.array([c if c < len(table) else -1 for c in picks], dtype=np.int64)
    want = [table[c] if c >= 0 else None for c in codes]
    # int64 codes; int32 codes (read in place: the importer's); a strided int32 view (copied)
    for c in (codes, codes.astype(np.int32), np.repeat(codes.astype(np.int32), 2)[::2]):
        got = _arrow.strings(table, c, "n")
        assert got.dtype == pl.String
        assert got.to_list() == want
        assert got.null_count() == int((codes < 0).sum())


def test_strings_at_the_inline_boundary() -> None:
    # Views hold strings of up to 12 bytes themselves; longer ones point into a data buffer.
    table = ["", "x" * 11, "y" * 12, "z" * 13, "é" * 6, "é" * 7, "日本語のテキストです"]
    codes = np.array([6, 5, 4, 3, 2, 1, 0, 3, 3], dtype=np.int64)
    assert _arrow.strings(table, codes).to_list() == [table[c] for c in codes]


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 2),
            st.one_of(st.just(NULL), st.integers(-(2**62), 2**62)),
            st.integers(-1, 1),
        ),
        max_size=40,
    ),
    cats=st.lists(TEXT, min_size=3, max_size=3),
    syncs=st.lists(TEXT, min_size=2, max_size=2),
)
def test_kineto_detail_matches_the_general_readers_rule(
    rows: list[tuple[int, int, int]], cats: list[str], syncs: list[str]
) -> None:
    cat = np.array([r[0] for r in rows], dtype=np.int32)
    ext = np.array([r[1] for r in rows], dtype=np.int64)
    sync = np.array([r[2] for r in rows], dtype=np.int32)
    got = pl.Series(_core.kineto_detail(cat, cats, ext, sync, syncs).result()).to_list()
    want = [
        cats[c] + (f";ext={e}" if e != NULL else "") + (f";sync_kind={syncs[y]}" if y >= 0 else "")
        for c, e, y in rows
    ]
    assert got == want
    # Written by a thread of its own: the same column.
    job = _core.kineto_detail(cat, cats, ext, sync, syncs)
    job.start()
    assert pl.Series(job.result()).to_list() == want


def test_kineto_detail_in_parts_shared_by_two_threads() -> None:
    # The rows are written in parts of 8192: the job's thread takes them from the front, the
    # caller (result()) from the back, each part's longer strings in a buffer of its own.
    rng = np.random.default_rng(3)
    n = 5 * 8192 + 17
    cats = ["cat=cpu_op", "cat=kernel", "cat=a category past twelve bytes"]
    syncs = ["event", "stream wait"]
    cat = rng.integers(0, 3, n).astype(np.int32)
    ext = np.where(rng.random(n) < 0.5, NULL, rng.integers(-(10**12), 10**12, n))
    sync = rng.integers(-1, 2, n).astype(np.int32)
    want = [
        cats[c] + (f";ext={e}" if e != NULL else "") + (f";sync_kind={syncs[y]}" if y >= 0 else "")
        for c, e, y in zip(cat.tolist(), ext.tolist(), sync.tolist(), strict=True)
    ]
    for threaded in (False, True):
        job = _core.kineto_detail(cat, cats, ext, sync, syncs)
        if threaded:
            job.start()
        got = pl.Series(job.result())
        assert got.len() == n
        assert got.to_list() == want


@settings(max_examples=40, deadline=None)
@given(
    cats=st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=300, unique=True),
    picks=st.lists(st.one_of(st.none(), st.integers(0, 299)), max_size=60),
    cut=st.integers(0, 60),
    null_code=st.integers(0, 255),
)
def test_enum_codes_are_the_physical_codes_whatever_the_chunks(
    cats: list[str], picks: list[int | None], cut: int, null_code: int
) -> None:
    # Read through Arrow, not to_physical() (a Polars query); chunked and sliced Series too.
    values = [None if p is None else cats[p % len(cats)] for p in picks]
    whole = pl.Series("e", values, dtype=pl.Enum(cats))
    cut = min(cut, len(values))
    chunked = pl.concat([whole[:cut], whole[cut:]], rechunk=False)
    for s in (whole, chunked, whole[cut // 2 :]):
        got = _arrow.enum_codes(s, null_code)
        want = s.to_physical().fill_null(null_code).to_numpy()
        assert got.dtype == (np.uint8 if len(cats) <= 256 else np.uint32)
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize("direct", [True, False], ids=["native", "public"])
def test_columns_and_frames_equal_polars_public_constructors(
    direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `column` / `frame_of` skip the public constructors' input dispatch where this Polars has
    # its native types; without them (an older or newer Polars) they call the public ones.
    if direct:
        assert _arrow._DIRECT is not None, "this Polars lost the native constructors"
    else:
        monkeypatch.setattr(_arrow, "_DIRECT", None)
    a = np.array([3, -1, 7], dtype=np.int64)
    got = _arrow.column(_core.arrow_numeric(a, "n"))
    assert got.equals(pl.Series("n", a), check_names=True)
    words = _arrow.column(_core.arrow_strings(["x", "a long string here"], np.array([1, -1, 0])))
    assert words.to_list() == ["a long string here", None, "x"]
    cols = [got, words.alias("w"), _arrow.series(np.array([0.5, 1.5, 2.5]), "f")]
    df = _arrow.frame_of(cols)
    assert df.equals(pl.DataFrame(cols))
    assert df.columns == ["n", "w", "f"]
    with pytest.raises(pl.exceptions.ShapeError):
        _arrow.frame_of([got, pl.Series("short", [1, 2])])
    with pytest.raises(pl.exceptions.DuplicateError):
        _arrow.frame_of([got, got])


def test_bad_input_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="1-D"):
        _core.arrow_numeric(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="contiguous"):
        _core.arrow_numeric(np.arange(10)[::2])
    with pytest.raises(TypeError, match="no Arrow type"):
        _core.arrow_numeric(np.array(["a"], dtype=object))
    with pytest.raises(IndexError, match="past the table"):
        _core.arrow_strings(["a"], np.array([1]))
    with pytest.raises(IndexError, match="past the table"):
        _core.arrow_strings(["a"], np.array([1], dtype=np.int32))
    with pytest.raises(ValueError, match="differ in length"):
        _core.kineto_detail(
            np.zeros(2, np.int32), ["c"], np.zeros(1, np.int64), np.zeros(2, np.int32), []
        )
    with pytest.raises(IndexError, match="past its table"):  # before any thread starts
        _core.kineto_detail(
            np.array([0, 1], np.int32), ["c"], np.zeros(2, np.int64), np.full(2, -1, np.int32), []
        )
    job = _core.kineto_detail(
        np.zeros(1, np.int32), ["c"], np.zeros(1, np.int64), np.full(1, -1, np.int32), []
    )
    job.start()
    with pytest.raises(RuntimeError, match="started already"):
        job.start()
    assert pl.Series(job.result()).to_list() == ["c;ext=0"]
    with pytest.raises(RuntimeError, match="taken already"):
        job.result()
    with pytest.raises(ValueError, match="past the categories"):
        _core.arrow_enum(np.array([0, 2], np.uint8), ["a", "b"])
    with pytest.raises(ValueError, match="1 to 256 categories"):
        _core.arrow_enum(np.zeros(1, np.uint8), [])
    with pytest.raises(TypeError, match="uint8"):
        _core.arrow_enum(np.zeros(1, np.int64), ["a"])
    with pytest.raises(ValueError, match="requested schema"):
        _core.arrow_numeric(np.arange(3)).__arrow_c_array__(object())
    with pytest.raises(TypeError, match="expected an Enum"):
        _arrow.enum_codes(pl.Series([1, 2]))
    with pytest.raises(TypeError, match="dictionary column"):
        _core.dictionary_codes(pl.Series([1, 2]), 2)
    with pytest.raises(ValueError, match="out of range"):
        _arrow.enum_codes(pl.Series(["a"], dtype=pl.Enum(["a"])), 256)
    with pytest.raises(RuntimeError, match="not the categories"):
        _core.dictionary_codes(pl.Series(["a"], dtype=pl.Enum(["a", "b"])), 3)


def test_import_and_views_do_not_load_numpy_ma(kineto_data: Path) -> None:
    # numpy.ma costs ~20 ms on first use; Polars' NumPy constructor and np.unique import it.
    code = (
        "import sys, warnings; warnings.simplefilter('ignore');"
        "sys.modules['numpy.ma'] = None;"  # any use raises
        "import stallscope, stallscope.analysis as a;"
        f"ev = stallscope.import_kineto({str(kineto_data / 'hta_a100_rank0_of2_ncclmeta')!r});"
        "[f(ev) for f in (a.stall_table, a.temporal_breakdown, a.idle_time_breakdown,"
        " a.kernel_type_breakdown, a.kernel_breakdown, a.comm_comp_overlap, a.launch_stats,"
        " a.queue_length)]"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]


def test_import_and_views_of_a_small_trace_make_no_polars_query(kineto_data: Path) -> None:
    # A process's first Polars query costs ~3 ms (its engine's first use), each later one
    # ~0.1-0.3 ms: the import, the HTA views and the stall table of a trace below the stall
    # table's PARALLEL_ROWS take their columns as arrays and build frames without one.
    code = "\n".join(
        [
            "import sys, warnings",
            "warnings.simplefilter('ignore')",
            "import stallscope, stallscope.analysis as a",
            "seen = []",
            "def hook(frame, event, arg):",
            "    if event == 'c_call' and 'PyLazyFrame' in repr(arg):",  # a query runs
            "        while frame and 'stallscope' not in frame.f_code.co_filename:",
            "            frame = frame.f_back",
            "        seen.append(frame and f'{frame.f_code.co_filename}:{frame.f_lineno}')",
            "sys.setprofile(hook)",
            f"ev = stallscope.import_kineto({str(kineto_data / 'hta_a100_rank0_of2_ncclmeta')!r})",
            "for f in (a.temporal_breakdown, a.idle_time_breakdown, a.kernel_type_breakdown,",
            "          a.kernel_breakdown, a.stall_table):",
            "    f(ev)",
            "sys.setprofile(None)",
            "print(seen)",
        ]
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "[]"
