"""`python -m stallscope VERB ...`, the same as the `stallscope` command."""

from stallscope._cli.main import main

main()
