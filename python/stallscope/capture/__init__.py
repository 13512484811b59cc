"""Capture: the trace lifecycle (start, stop, exit, SIGTERM, fork), the recording API (regions,
steps, marks, counters, the loader wrapper), the Parquet writer, and the capture backends
(CUPTI, clock sync, launching untouched programs). The public names are re-exported by
`stallscope`."""
