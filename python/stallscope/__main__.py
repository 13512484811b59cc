"""`python -m stallscope VERB ...`, the same as the `stallscope` command."""

from stallscope.cli.main import main

main()
