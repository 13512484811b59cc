"""The `stallscope` command line: one module per verb, registered in main.py."""
