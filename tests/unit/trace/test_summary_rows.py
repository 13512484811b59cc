"""The summary a continuous trace writes, fed as the writer feeds it (chunks in drain order, a
tick at each flush), read back by load_summary across ranks: the stall table of the same
events, whenever every event of a step was drained before the lag after the step passed."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import stallscope
from stallscope.analysis import STALL_COLUMNS, stall_table
from stallscope.analysis.stall._table import prepare
from stallscope.capture._summarizer import Summarizer
from stallscope.io._summary_files import SummaryWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from test_stall_table_properties import event_sets, frame  # type: ignore[import-not-found]

_COLS = ["rank", "step", "start_ns", "end_ns", "step_ns", *STALL_COLUMNS]
_GPU = ("kernel", "memcpy", "memset", "gpu_sync")


def _feed(
    ev: pl.DataFrame, run: Path, delay: list[int], ticks: list[int], rows_per_file: int
) -> None:
    """Each rank's events drained at end_ns + a delay, in chunks between ticks; the lag is
    the longest event plus the longest delay (so a step's events are all in by then)."""
    gpu = bool(ev["kind"].is_in(_GPU).any())
    multi = prepare(ev, match=False).multi
    lag = int((ev["end_ns"] - ev["start_ns"]).max() or 0) + max(delay)  # type: ignore[operator]
    for r in ev["rank"].unique().sort().to_list():
        mine = ev.filter(pl.col("rank") == r).with_row_index("_i")
        waits = [delay[i % len(delay)] for i in range(mine.height)]
        drained = mine.with_columns(_t=pl.col("end_ns") + pl.Series(waits)).sort("_t")
        s = Summarizer(SummaryWriter(run, f"rank-{r:05d}", rows_per_file), lag_ns=lag)
        s.gpu = gpu  # the run is a GPU run when any rank has GPU activity
        if multi is not None:  # and its multi-node collectives: whole-run facts, as these two
            s.multi = multi  # are taken as seen so far in a running trace (module docstring)
        at = sorted(ticks)
        prev = -(10**9)
        for t in [*at, 10**12]:
            chunk = drained.filter((pl.col("_t") > prev) & (pl.col("_t") <= t))
            prev = t
            if chunk.height:
                s.add(chunk.drop("_i", "_t").to_arrow())
            s.tick(t)
        s.tick(10**12, final=True)
        s.out.roll()


def _one_arrival_per_sequence(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with each rank's first call of a collective (group, operation, sequence
    number) only: a rank's calls in a group are numbered one by one, so a traced rank never
    arrives twice at one instance (the stall table's event sets do not ensure it)."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for r in rows:
        if r["kind"] in ("collective", "p2p"):
            key = (r["rank"], r["kind"], r.get("name"), r.get("detail"), r.get("correlation"))
            if key in seen:
                continue
            seen.add(key)
        out.append(r)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    event_sets(),
    st.one_of(st.none(), st.integers(0, 6)),
    st.lists(st.integers(0, 8), min_size=1, max_size=5),
    st.lists(st.integers(-10, 90), max_size=30),
    st.integers(1, 4),
)
def test_summary_read_across_ranks_is_the_stall_table(
    rows: list[dict[str, Any]],
    longest: int | None,
    delay: list[int],
    ticks: list[int],
    rows_per_file: int,
) -> None:
    if longest is not None:  # short events: most rows are written before the end
        rows = [{**r, "end_ns": min(r["end_ns"], r["start_ns"] + longest)} for r in rows]
    ev = frame(_one_arrival_per_sequence(rows))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "summary").mkdir()
        if ev.height:
            _feed(ev, tmp, delay, ticks, rows_per_file)
        got = stallscope.load_summary(tmp)
    want = stall_table(ev).sort("rank", "start_ns")
    assert_frame_equal(got.select(_COLS), want.select(_COLS), check_dtypes=False)
    assert got["matched"].dtype == pl.Boolean and got["straggler"].dtype == pl.Boolean


def test_an_arrival_right_at_a_step_marker_is_kept(tmp_path: Path) -> None:
    """Rank 1 arrives at the collective at the very instant its step 2 begins; rank 0 waits
    for it. The arrival goes with no row of step 1 (it is not in it) and must survive the
    buffer's trim until a later row (or the trace's last one) takes it."""
    coll = {"kind": "collective", "category": "comm", "correlation": 0, "lane": 0}
    detail = "group=g0;group_size=2;nnodes=1;async=0"
    rows: list[dict[str, Any]] = []
    for rank in (0, 1):
        rows += [
            {"rank": rank, "kind": "step", "category": "host", "start_ns": t, "end_ns": t,
             "correlation": i}
            for i, t in enumerate((0, 100, 200))
        ]  # fmt: skip
    rows.append({**coll, "rank": 0, "start_ns": 50, "end_ns": 150, "detail": detail})
    rows.append({**coll, "rank": 1, "start_ns": 100, "end_ns": 100, "detail": detail})
    ev = frame(rows)
    (tmp_path / "summary").mkdir()
    _feed(ev, tmp_path, [0], [120, 160, 250], 1)
    got = stallscope.load_summary(tmp_path)
    want = stall_table(ev).sort("rank", "start_ns")
    assert_frame_equal(got.select(_COLS), want.select(_COLS), check_dtypes=False)
    assert int(got.filter(pl.col("rank") == 0)["sync_wait_ns"].sum()) == 50


def test_summary_columns_are_the_stall_tables() -> None:
    from stallscope.analysis import STALL_COLUMNS
    from stallscope.io._summary_files import STALL_COLUMNS as SUMMARY_COLUMNS

    assert SUMMARY_COLUMNS == STALL_COLUMNS


def test_a_bucket_from_a_written_step_still_blocks_the_next(tmp_path: Path) -> None:
    """A DDP bucket starts in step 0 and runs into step 1 over a compute region: the stall
    table places the bucket in step 0 (by its start) and counts the thread blocked until it
    ends, in step 1 too. Once step 0 is written, the buffer must keep step 0's marker, or the
    bucket belongs to no step and step 1's blocked time turns into compute."""
    step = {"rank": 0, "kind": "step", "category": "host"}
    rows = [
        *({**step, "start_ns": t, "end_ns": t, "correlation": t} for t in (0, 1, 2)),
        {"rank": 0, "kind": "region", "category": "compute", "start_ns": 0, "end_ns": 2,
         "correlation": 0, "lane": 0},
        {"rank": 0, "kind": "bucket", "category": "comm", "start_ns": 0, "end_ns": 2,
         "correlation": 0, "lane": 0, "detail": "params=1;last=0"},
    ]  # fmt: skip
    ev = frame(rows)
    (tmp_path / "summary").mkdir()
    _feed(ev, tmp_path, [0], [3], 1)  # step 0 is written at the tick, step 1 at the end
    got = stallscope.load_summary(tmp_path)
    want = stall_table(ev).sort("rank", "start_ns")
    assert want["compute_ns"].to_list() == [0, 0]  # blocked on the bucket throughout
    assert_frame_equal(got.select(_COLS), want.select(_COLS), check_dtypes=False)


def test_a_short_last_bucket_inside_a_collective_past_the_cut_still_blocks(
    tmp_path: Path,
) -> None:
    """The last bucket of step 0 ends before step 1 begins, inside an asynchronous collective
    that runs on into step 1: the thread waits from the bucket's start until that collective
    ends. Once step 0 is written the bucket ends before the cut, but the buffer must keep it
    (its span of communication is still in flight), or step 1's wait turns into compute."""
    step = {"rank": 0, "kind": "step", "category": "host"}
    comm = {"rank": 0, "category": "comm", "lane": 0}
    rows = [
        *({**step, "start_ns": t, "end_ns": t, "correlation": t} for t in (0, 10, 20)),
        {"rank": 0, "kind": "region", "category": "compute", "start_ns": 0, "end_ns": 20,
         "correlation": 0, "lane": 0},
        {**comm, "kind": "bucket", "start_ns": 8, "end_ns": 9, "correlation": 0,
         "detail": "params=1;last=1"},
        {**comm, "kind": "collective", "start_ns": 8, "end_ns": 15, "correlation": 1,
         "detail": "group=g0;group_size=1;nnodes=1;async=1"},
    ]  # fmt: skip
    ev = frame(rows)
    (tmp_path / "summary").mkdir()
    _feed(ev, tmp_path, [0], [31], 1)  # the lag is 20: step 0 is written at the tick
    got = stallscope.load_summary(tmp_path)
    want = stall_table(ev).sort("rank", "start_ns")
    assert want["compute_ns"].to_list() == [8, 5]  # blocked from 8 until 15
    assert_frame_equal(got.select(_COLS), want.select(_COLS), check_dtypes=False)


def test_a_region_from_before_the_first_step_does_not_hide_the_buckets_step(
    tmp_path: Path,
) -> None:
    """A compute region begins before the first step marker and runs into step 1, beside a
    bucket that began in step 0: the region belongs to no step, so it must not decide which
    markers the buffer keeps; step 0's marker stays for the bucket, which blocks step 1."""
    step = {"rank": 0, "kind": "step", "category": "host"}
    rows = [
        *({**step, "start_ns": t, "end_ns": t, "correlation": t} for t in (0, 1, 2)),
        {"rank": 0, "kind": "region", "category": "compute", "start_ns": -1, "end_ns": 2,
         "correlation": 0, "lane": 0},
        {"rank": 0, "kind": "bucket", "category": "comm", "start_ns": 0, "end_ns": 2,
         "correlation": 0, "lane": 0, "detail": "params=1;last=0"},
    ]  # fmt: skip
    ev = frame(rows)
    (tmp_path / "summary").mkdir()
    _feed(ev, tmp_path, [0], [4], 1)
    got = stallscope.load_summary(tmp_path)
    want = stall_table(ev).sort("rank", "start_ns")
    assert want["compute_ns"].to_list() == [0, 0]
    assert_frame_equal(got.select(_COLS), want.select(_COLS), check_dtypes=False)
