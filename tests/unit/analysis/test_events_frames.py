"""Every analysis function that takes an events frame says so when it gets another frame: the
function, the missing event columns and what returns an events frame, as an EventsError (a
StallscopeError and a ValueError), never a Polars error from deep inside a query. A frame
with the required columns only gets the schema's defaults for the rest."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import stallscope.analysis as an
from stallscope._schema import COLUMNS, conform
from stallscope.exceptions import EventsError, StallscopeError

#: Public functions whose first argument is not an events frame.
NOT_EVENTS = {"stall_legend", "stream_run"}
#: These also take a stall table (their own check words that case).
EVENTS_OR_TABLE = {"stall_summary", "stall_run_summary"}


def _events_functions() -> list[str]:
    return [
        n
        for n in an.__all__
        if callable(getattr(an, n))
        and not inspect.isclass(getattr(an, n))
        and n not in NOT_EVENTS | EVENTS_OR_TABLE
    ]


def _collected(x: Any) -> Any:
    return x.collect() if isinstance(x, pl.LazyFrame) else x


@pytest.mark.parametrize("name", _events_functions())
def test_a_frame_without_event_columns_names_the_function_and_the_fix(name: str) -> None:
    fn: Callable[..., Any] = getattr(an, name)
    with pytest.raises(EventsError) as err:
        _collected(fn(pl.DataFrame({"a": [1]})))
    msg = str(err.value)
    assert name in msg and "start_ns" in msg and "stallscope.load(run_dir)" in msg
    assert isinstance(err.value, StallscopeError) and isinstance(err.value, ValueError)
    table = pl.DataFrame({"rank": [0], "step": [1], "step_ns": [5]}).lazy()
    with pytest.raises(EventsError, match="looks like a stall table"):
        _collected(fn(table))


@pytest.mark.parametrize("name", _events_functions())
def test_the_required_columns_are_enough(name: str) -> None:
    fn: Callable[..., Any] = getattr(an, name)
    part = pl.DataFrame(
        {
            "kind": ["step", "kernel", "kernel"],
            "name": ["1", "gemm", "gemm"],
            "start_ns": [0, 10, 40],
            "end_ns": [100, 30, 90],
        }
    )
    full = conform(part).collect()
    assert full.columns == list(COLUMNS)
    got, want = _collected(fn(part)), _collected(fn(full))
    # the defaults come last and the given columns keep their types (kind as text, not Enum)
    assert_frame_equal(got, want, check_column_order=False, check_dtypes=False)
