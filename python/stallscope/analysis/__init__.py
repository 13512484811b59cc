"""Analysis of events: functions take and return Polars frames; they never print or plot."""

from stallscope.analysis._capture_summary import capture_summary
from stallscope.analysis._collectives import collectives, match_collectives, stragglers
from stallscope.analysis._stall_summary import stall_run_summary, stall_summary
from stallscope.analysis._stall_table import (
    STALL_CATEGORIES,
    STALL_COLUMNS,
    stall_intervals,
    stall_table,
)
from stallscope.analysis._steps import assign_steps, step_windows

__all__ = [
    "assign_steps",
    "capture_summary",
    "collectives",
    "match_collectives",
    "step_windows",
    "stragglers",
]
__all__ += [
    "STALL_CATEGORIES",
    "STALL_COLUMNS",
    "stall_intervals",
    "stall_run_summary",
    "stall_summary",
    "stall_table",
]
