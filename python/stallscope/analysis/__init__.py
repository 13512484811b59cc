"""Analysis of events: functions take and return Polars frames; they never print or plot.

The functions here that take an events frame check it at the door (``takes_events``): a frame
without the event columns raises EventsError naming the function and the fix; one without some
optional columns gets their defaults. Inside the package they are called on projected frames
unchecked."""

from stallscope._schema import takes_events
from stallscope.analysis import _capture_summary, _collectives, _launches, _steps
from stallscope.analysis.hta import _idle, _kernels, _launch, _overlap, _queue, _temporal
from stallscope.analysis.stall import _table, _timeline
from stallscope.analysis.stall._meanings import STALL_MEANINGS, stall_legend
from stallscope.analysis.stall._streaming import StreamedRun, stream_run
from stallscope.analysis.stall._summary import stall_run_summary, stall_summary
from stallscope.analysis.stall._table import STALL_CATEGORIES, STALL_COLUMNS

capture_summary = takes_events(_capture_summary.capture_summary)
collectives = takes_events(_collectives.collectives)
match_collectives = takes_events(_collectives.match_collectives)
stragglers = takes_events(_collectives.stragglers)
launches = takes_events(_launches.launches)
assign_steps = takes_events(_steps.assign_steps)
step_windows = takes_events(_steps.step_windows)
idle_time_breakdown = takes_events(_idle.idle_time_breakdown)
kernel_breakdown = takes_events(_kernels.kernel_breakdown)
kernel_type_breakdown = takes_events(_kernels.kernel_type_breakdown)
launch_stats = takes_events(_launch.launch_stats)
launch_stats_summary = takes_events(_launch.launch_stats_summary)
comm_comp_overlap = takes_events(_overlap.comm_comp_overlap)
queue_length = takes_events(_queue.queue_length)
queue_length_summary = takes_events(_queue.queue_length_summary)
temporal_breakdown = takes_events(_temporal.temporal_breakdown)
stall_table = takes_events(_table.stall_table)
stall_intervals = takes_events(_timeline.stall_intervals)

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
