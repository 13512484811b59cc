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
    lag = int((ev["end_ns"] - ev["start_ns"]).max() or 0) + max(delay)  # type: ignore[operator]
    for r in ev["rank"].unique().sort().to_list():
        mine = ev.filter(pl.col("rank") == r).with_row_index("_i")
        waits = [delay[i % len(delay)] for i in range(mine.height)]
        drained = mine.with_columns(_t=pl.col("end_ns") + pl.Series(waits)).sort("_t")
        s = Summarizer(SummaryWriter(run, f"rank-{r:05d}", rows_per_file), lag_ns=lag)
        s.gpu = gpu  # the run is a GPU run when any rank has GPU activity
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
    ev = frame(rows)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "summary").mkdir()
        if ev.height:
            _feed(ev, tmp, delay, ticks, rows_per_file)
        got = stallscope.load_summary(tmp)
    want = stall_table(ev).sort("rank", "start_ns")
    assert_frame_equal(got.select(_COLS), want.select(_COLS), check_dtypes=False)
    assert got["matched"].dtype == pl.Boolean and got["straggler"].dtype == pl.Boolean
