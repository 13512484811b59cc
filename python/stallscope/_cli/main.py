"""`stallscope VERB ...`: each verb lives in a module of its own and is registered here."""

from __future__ import annotations

import click

from stallscope import __version__
from stallscope._cli.bench import bench
from stallscope._cli.demo import demo
from stallscope._cli.export import export
from stallscope._cli.import_ import import_
from stallscope._cli.profile import profile
from stallscope._cli.report import report
from stallscope._cli.testbed import testbed


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="stallscope")
def cli() -> None:
    """stallscope: where each training step's time goes, and what another cluster would do."""


for _command in (demo, profile, report, export, import_, bench, testbed):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="stallscope")


if __name__ == "__main__":
    main()
