"""Analysis of events: functions take and return Polars frames; they never print or plot."""

from stallscope.analysis._capture_summary import capture_summary
from stallscope.analysis._collectives import collectives, match_collectives, stragglers
from stallscope.analysis._launches import launches
from stallscope.analysis._steps import assign_steps, step_windows
from stallscope.analysis.hta._idle import idle_time_breakdown
from stallscope.analysis.hta._kernels import kernel_breakdown, kernel_type_breakdown
from stallscope.analysis.hta._launch import launch_stats, launch_stats_summary
from stallscope.analysis.hta._overlap import comm_comp_overlap
from stallscope.analysis.hta._queue import queue_length, queue_length_summary
from stallscope.analysis.hta._temporal import temporal_breakdown
from stallscope.analysis.stall._meanings import STALL_MEANINGS, stall_legend
from stallscope.analysis.stall._streaming import StreamedRun, stream_run
from stallscope.analysis.stall._summary import stall_run_summary, stall_summary
from stallscope.analysis.stall._table import STALL_CATEGORIES, STALL_COLUMNS, stall_table
from stallscope.analysis.stall._timeline import stall_intervals

__all__ = [
    "StreamedRun",
    "assign_steps",
    "capture_summary",
    "collectives",
    "launches",
    "match_collectives",
    "step_windows",
    "stragglers",
]
__all__ += [
    "STALL_CATEGORIES",
    "STALL_COLUMNS",
    "STALL_MEANINGS",
    "comm_comp_overlap",
    "idle_time_breakdown",
    "kernel_breakdown",
    "kernel_type_breakdown",
    "launch_stats",
    "launch_stats_summary",
    "queue_length",
    "queue_length_summary",
    "stall_intervals",
    "stall_legend",
    "stall_run_summary",
    "stall_summary",
    "stall_table",
    "stream_run",
    "temporal_breakdown",
]
