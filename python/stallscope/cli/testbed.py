"""`stallscope testbed`: run a command on N emulated machines (network namespaces, shaped links)."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Run a command on emulated machines with shaped links.",
)
@click.option("--nodes", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--ranks-per-node", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option(
    "--rate",
    default="1gbit",
    show_default=True,
    help="Each node's link rate (tc units: 1gbit, 200mbit, 50mbit); 'none' for unshaped; "
    "comma-separated for one rate per node.",
)
@click.option("--subnet", default="198.18.0.0/24", show_default=True, help="Inside 198.18.0.0/15.")
@click.option("--mtu", type=click.IntRange(576, 65535), default=1500, show_default=True)
@click.option("--port", type=click.IntRange(1024, 65535), default=29500, show_default=True)
@click.option(
    "--burst",
    type=click.IntRange(1),
    default=None,
    help="tbf token bucket in bytes (default: 2 ms of the rate, at least two frames).",
)
@click.option(
    "--realtime",
    is_flag=True,
    help="Run the ranks under SCHED_FIFO so that other work on this machine's cores does not "
    "delay them (recommended for communication benchmarks on a shared machine).",
)
@click.option(
    "--no-ack-priority",
    is_flag=True,
    help="One FIFO per link: pure TCP ACKs wait behind queued data (by default they go first, "
    "as on separate wires per direction; without it bidirectional transfers such as all-reduce "
    "can run below the link rate).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(1.0),
    default=600.0,
    show_default=True,
    help="Seconds before every rank is stopped.",
)
@click.option(
    "--cleanup",
    is_flag=True,
    help="Only remove what earlier test beds whose launcher died left behind, then exit.",
)
@click.option(
    "--logs",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep every rank's output in DIR/rank<N>.log (rank 0's too, besides showing it).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def testbed(
    nodes: int,
    ranks_per_node: int,
    rate: str,
    subnet: str,
    mtu: int,
    port: int,
    burst: int | None,
    realtime: bool,
    no_ack_priority: bool,
    timeout: float,
    cleanup: bool,
    logs: Path | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND on every rank of NODES emulated machines (root and iproute2 needed).

    Each rank gets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
    GROUP_RANK/NODE_RANK and GLOO_SOCKET_IFNAME. Rank 0's output is shown; the others' when they
    fail. Everything created is removed at the end, on error, timeout and Ctrl-C. Example:

        stallscope testbed --nodes 2 --rate 200mbit -- stallscope bench comm -b 64K -e 16M
    """
    from stallscope.testbed import Testbed, TestbedError, require_privileges, sweep_stale

    try:
        if cleanup:
            require_privileges()
            removed = sweep_stale()
            click.echo(f"removed {len(removed)} leftover namespace(s): {' '.join(removed) or '-'}")
            return
        if not command:
            raise click.UsageError("give the command to run after --, e.g. -- python train.py")
        if logs is not None:
            from stallscope.cli._paths import output_dir

            output_dir(logs)
        rates: list[str | None] = [
            None if r.strip().lower() == "none" else r.strip() for r in rate.split(",")
        ]
        if len(rates) == 1:
            rates = rates * nodes
        tb = Testbed(
            nodes,
            ranks_per_node,
            rates,
            subnet=subnet,
            mtu=mtu,
            master_port=port,
            burst=burst,
            realtime=realtime,
            ack_priority=not no_ack_priority,
        )
        with tb:
            click.echo(
                f"testbed {tb.run_id}: {nodes} node(s) x {ranks_per_node} rank(s), rate "
                f"{','.join(r or 'unshaped' for r in rates)}, namespaces {' '.join(tb.namespaces)}",
                err=True,
            )
            result = tb.run(
                list(command), timeout_s=timeout, stream_rank0=logs is None, log_dir=logs
            )
            if logs is not None:
                click.echo(result.outputs[0], nl=False)
        for r, code in enumerate(result.returncodes):
            if code != 0 and r != 0:
                click.echo(
                    f"--- rank {r} exited with {code}:\n{result.outputs[r][-3000:]}", err=True
                )
        if result.timed_out:
            click.echo(f"testbed: stopped after the {timeout:.0f} s timeout", err=True)
            sys.exit(124)
        if not result.ok:
            click.echo(f"testbed: exit codes per rank {result.returncodes}", err=True)
            sys.exit(1)
    except TestbedError as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        click.echo("testbed: interrupted; removed everything it created", err=True)
        sys.exit(130)
