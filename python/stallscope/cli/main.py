"""`stallscope VERB ...`: each verb lives in a module of its own and is registered here."""

from __future__ import annotations

import click

from stallscope import __version__
from stallscope.cli.analyze import analyze
from stallscope.cli.bench import bench
from stallscope.cli.capture import capture
from stallscope.cli.catalog import catalog
from stallscope.cli.demo import demo
from stallscope.cli.export import export
from stallscope.cli.import_ import import_
from stallscope.cli.plan import plan, whatif
from stallscope.cli.predict import predict
from stallscope.cli.profile import profile
from stallscope.cli.recommend import recommend
from stallscope.cli.report import report
from stallscope.cli.testbed import testbed
from stallscope.cli.top import top


class _Verbs(click.Group):
    """The verbs' group. A verb words its own errors; any StallscopeError one lets through (an
    input it did not expect to be bad) still ends as click's one-line "Error: ...", exit 1,
    never a traceback: each such error's message names the problem and the fix."""

    def invoke(self, ctx: click.Context) -> object:
        from stallscope.exceptions import StallscopeError

        try:
            return super().invoke(ctx)
        except StallscopeError as e:
            raise click.ClickException(str(e)) from None


@click.group(
    cls=_Verbs,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="stallscope")
def cli() -> None:
    """stallscope: where each training step's time goes, and what another cluster would do."""


for _command in (
    demo,
    profile,
    report,
    top,
    capture,
    export,
    import_,
    predict,
    bench,
    testbed,
    catalog,
    recommend,
    plan,
    whatif,
    analyze,
):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="stallscope")


if __name__ == "__main__":
    main()
