"""The built-in default workload of `stallscope demo`."""
