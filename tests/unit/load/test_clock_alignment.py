"""load() aligns every rank's clock with its own offsets, whatever the files' layout: a file of
one rank (the native writer's, aligned from literals) and files mixing ranks or without
statistics (aligned by a join) give the same times, rows stay in file order."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import stallscope
from stallscope._schema import SCHEMA
from stallscope.io._run_json import FORMAT, FORMAT_VERSION

# Rank 3's file is missing in some runs below: load warns, as it should.
pytestmark = pytest.mark.filterwarnings("ignore::stallscope.StallscopeWarning")

T0 = 1_700_000_000_000_000_000
# rank -> (local_ns, offset_ns) at start and at stop; rank 3 measured none.
SAMPLES = {
    0: ((T0, 0), (T0 + 10**9, 0)),
    1: ((T0, 1_234), (T0 + 10**9, 3_233)),
    2: ((T0 + 5, -7_777), (T0 + 2 * 10**9, -9_000)),
}


def _events(ranks: list[int], n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    start = T0 + rng.integers(0, 2 * 10**9, n)
    return pl.DataFrame(
        {
            "rank": rng.choice(ranks, n).astype(np.int32),
            "pid": np.full(n, 7, np.int32),
            "kind": ["kernel"] * n,
            "category": ["compute"] * n,
            "name": [f"k{i % 5}" for i in range(n)],
            "start_ns": start,
            "end_ns": start + rng.integers(0, 10**6, n),
            "lane": np.zeros(n, np.int32),
            "device": np.zeros(n, np.int16),
            "correlation": np.arange(n),
            "bytes": np.zeros(n, np.int64),
            "value": [None] * n,
            "detail": [None] * n,
        }
    ).cast(SCHEMA)  # type: ignore[arg-type]


def _run(tmp: Path, files: dict[str, pl.DataFrame], statistics: bool = True) -> Path:
    tmp.mkdir()
    procs = {}
    for r in range(4):
        entry: dict[str, object] = {"rank": r, "world_size": 4, "status": "stopped"}
        if r in SAMPLES:
            entry["clock"] = {
                "offsets": [{"local_ns": t, "offset_ns": o, "error_ns": 1} for t, o in SAMPLES[r]]
            }
        procs[f"rank-{r:05d}"] = entry
    (tmp / "run.json").write_text(
        json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION, "processes": procs})
    )
    for stem, df in files.items():
        df.write_parquet(tmp / f"{stem}.parquet", statistics=statistics, row_group_size=50)
    return tmp


def _expected(df: pl.DataFrame) -> pl.DataFrame:
    """The alignment written out row by row in Python (the oracle)."""
    starts, ends = [], []
    for rank, s, e in zip(df["rank"], df["start_ns"], df["end_ns"], strict=True):
        shift = 0
        if rank in SAMPLES:
            (ta, oa), (tb, ob) = SAMPLES[rank]
            shift = int(np.round(oa + (ob - oa) / (tb - ta) * (s - ta)))
        starts.append(s + shift)
        ends.append(e + shift)
    return df.with_columns(start_ns=pl.Series(starts), end_ns=pl.Series(ends))


@pytest.mark.parametrize("statistics", [True, False])
def test_every_layout_aligns_each_rank_with_its_own_clock(tmp_path: Path, statistics: bool) -> None:
    files = {
        "rank-00000": _events([0], 300, 1),
        "rank-00001": _events([1], 300, 2),
        # A file of several ranks (another writer's): each row by its own rank's clock.
        "rank-00002": _events([2, 1, 3], 300, 3),
        "rank-00003": _events([3], 300, 4),  # no clock samples: unshifted
    }
    run = _run(tmp_path / "run", files, statistics)
    got = stallscope.load(run)
    want = pl.concat([_expected(df) for df in files.values()])
    assert_frame_equal(got, want)  # rows in file order, every column in the schema


def test_align_clocks_false_leaves_times_alone(tmp_path: Path) -> None:
    files = {"rank-00001": _events([1], 100, 5), "rank-00002": _events([2, 3], 100, 6)}
    run = _run(tmp_path / "run", files)
    assert_frame_equal(stallscope.load(run, align_clocks=False), pl.concat(files.values()))


def test_null_start_keeps_end_unshifted_like_other_rows_of_no_clock(tmp_path: Path) -> None:
    df = _events([1], 10, 7).with_columns(
        start_ns=pl.when(pl.int_range(pl.len()) == 3).then(None).otherwise(pl.col("start_ns"))
    )
    run = _run(tmp_path / "run", {"rank-00001": df})
    got = stallscope.load(run)
    assert got["start_ns"][3] is None
    assert got["end_ns"][3] == df["end_ns"][3]
    assert got["start_ns"][0] != df["start_ns"][0]


def test_files_of_other_writers_are_cast_to_the_schema(tmp_path: Path) -> None:
    df = _events([1], 50, 8)
    # kind / category as plain strings, columns in another order, narrower ints
    other = df.select(
        pl.col("kind").cast(pl.String),
        pl.exclude("kind", "category", "device"),
        pl.col("category").cast(pl.String),
        pl.col("device").cast(pl.Int32),
    )
    run = _run(tmp_path / "run", {"rank-00001": other})
    assert_frame_equal(stallscope.load(run), _expected(df))


def test_eager_alignment_equals_the_scans_to_the_ns(monkeypatch: pytest.MonkeyPatch) -> None:
    """align_eager (per run of one rank's rows, NumPy) gives each event the shift `scan`
    gives it, rounding halves alike (slopes of 0.5 and 1.5 make exact halves)."""
    import stallscope.io._load as load_mod
    from stallscope.io._load import Clock, RunInfo, _align_one_rank, align_eager

    rng = np.random.default_rng(7)
    n = 5000
    rank = np.sort(rng.integers(0, 4, n)).astype(np.int32)
    rank[4000:4100] = 1  # a rank's rows in two runs
    start = rng.integers(-(10**12), 10**12, n)
    df = pl.DataFrame(
        {
            "i": np.arange(n),
            "rank": rank,
            "start_ns": start,
            "end_ns": start + rng.integers(0, 10**6, n),
        }
    )
    clocks = {0: Clock(0, 0, 0.0), 1: Clock(3, -7, 0.5), 2: Clock(10**9, 12_345, -1.5)}
    monkeypatch.setattr(load_mod, "_clock_offsets", lambda _info: clocks)
    got = align_eager(df, RunInfo(Path("."), {}, {}, 4, [0, 1, 2, 3]))
    want = pl.concat(
        [
            _align_one_rank(df.lazy().filter(pl.col("rank") == r), c).collect()
            for r, c in clocks.items()
        ]
        + [df.filter(pl.col("rank") == 3)]  # no clock: not moved
    )
    assert_frame_equal(got.sort("i"), want.sort("i"))
    assert not got.equals(df)
