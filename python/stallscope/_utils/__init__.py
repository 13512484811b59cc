"""Helpers shared by capture, io and analysis: Arrow/Polars columns, sorted arrays, CPU counts,
child processes, fair GIL hand-offs. Nothing here knows the event schema."""
