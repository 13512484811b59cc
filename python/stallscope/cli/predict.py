"""`stallscope predict RUN`: the step time and stalls of the measured job on other
configurations (a dispatch to stallscope.predict); `stallscope predict --model M --system S ...`:
a large-model configuration never run, from its shape, parallel split and system alone (the
planner's model mode, stallscope.cli.predict_model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from stallscope.cli.predict_model import model_mode_options, run_model_mode


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: give whole numbers, comma-separated", param_hint=what
        ) from None
    if not values or any(v < 1 for v in values):
        raise click.BadParameter(f"{text!r}: every value must be >= 1", param_hint=what)
    return values


def _rates(text: str | None) -> list[float | None]:
    from stallscope.testbed import TestbedError, parse_rate

    if text is None:
        return [None]
    out: list[float | None] = []
    for r in text.split(","):
        if r.strip().lower() == "none":
            out.append(None)
            continue
        try:
            out.append(parse_rate(r))
        except TestbedError as e:
            raise click.BadParameter(str(e), param_hint="--rate") from None
    return out


@click.command(short_help="Predict a measured job's step time and stalls on other clusters.")
@click.argument("run", type=click.Path(path_type=Path), required=False)
@click.option(
    "--nodes",
    default=None,
    help="Nodes, as for `stallscope testbed`; a list (2,4,8) sweeps. [default: as measured]",
)
@click.option(
    "--ranks-per-node",
    default=None,
    help="Ranks per node (they share the node's link); a list sweeps. [default: as measured]",
)
@click.option(
    "--rate",
    default=None,
    help="Each node's link rate in tc units (1gbit, 200mbit, 50mbit), as for `stallscope testbed`; "
    "a list sweeps. [default: the calibration's rate]",
)
@click.option(
    "--network",
    default=None,
    help="The network between nodes, from the link table (ib-ndr, aws-efa-p4d, ethernet-100g...; "
    "`stallscope catalog links`); a list sweeps. Overrides --rate.",
)
@click.option(
    "--measured-network",
    default=None,
    help="The network between the measured run's nodes, from the link table (e.g. ib-hdr): "
    "prices its collectives when their sizes must be estimated from their times.",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A `stallscope bench comm --calibrate` file: the link figures per tier.",
)
@click.option(
    "--device", default=None, help="Predict on another device type (a name of the device table)."
)
@click.option(
    "--compute-scale",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="A measured ratio of compute time on the target to the run's (overrides --device).",
)
@click.option("--strategy", type=click.Choice(["ddp", "fsdp"]), default="ddp", show_default=True)
@click.option(
    "--accumulation",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Micro-batches per optimizer step.",
)
@click.option(
    "--mtu",
    type=click.IntRange(576, 65535),
    default=1500,
    show_default=True,
    help="The links' MTU (with --rate).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the prediction as JSON (ns).",
)
@click.option(
    "-o",
    "--save-profile",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the profile taken from RUN (JSON: read it, edit it, pass it as RUN).",
)
@model_mode_options
def predict(
    run: Path | None,
    nodes: str | None,
    ranks_per_node: str | None,
    rate: str | None,
    network: str | None,
    measured_network: str | None,
    calibration: Path | None,
    device: str | None,
    compute_scale: float | None,
    strategy: str,
    accumulation: int,
    mtu: int,
    json_path: Path | None,
    save_profile: Path | None,
    **model_opts: Any,
) -> None:
    """Predict the step time and stalls of RUN's job on other configurations.

    RUN is a run directory, PyTorch profiler traces (a file or a folder) or a saved profile.
    Every combination of --nodes, --ranks-per-node and --rate is predicted; check one on the
    emulated test bed with the same flags, e.g.

    \b
        stallscope predict runs/ddp --nodes 2,4 --rate 200mbit --calibration cal.json
        stallscope testbed --nodes 2 --rate 200mbit -- python train.py

    With --model and --system instead of RUN, one large-model configuration never run (its
    shape, tensor / pipeline / data-parallel split, batch, recompute, ZeRO stage), e.g.

    \b
        stallscope predict --model gpt3-175b --system dgx-a100 --nodes 64 --tp 8 --pp 8 \\
            --global-batch 1536 --recompute full
    """
    if model_opts.get("model") is not None or model_opts.get("system") is not None:
        if run is not None:
            raise click.UsageError("give RUN (a measured run) or --model and --system, not both")
        if nodes is not None and not nodes.strip().isdigit():
            raise click.BadParameter(
                f"{nodes!r}: the model mode takes one node count", param_hint="--nodes"
            )
        run_model_mode(
            nodes=int(nodes) if nodes is not None else None, json_path=json_path, **model_opts
        )
        return
    if run is None:
        raise click.UsageError(
            "give RUN (a run directory, traces or a saved profile) or --model and --system"
        )
    ctx = click.get_current_context()
    given = [
        "--" + name.replace("_", "-")
        for name in model_opts
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    ]
    if given:  # options of the model mode would be ignored silently
        raise click.UsageError(
            f"{', '.join(given)} {'is an option' if len(given) == 1 else 'are options'} of the "
            "model mode (--model and --system); "
            "a measured RUN is predicted with --nodes, --ranks-per-node, --rate, ..."
        )
    import itertools
    import warnings

    import orjson

    from stallscope.cli.predict_render import print_prediction
    from stallscope.predict import (
        NoPeakError,
        PredictError,
        PredictWarning,
        Target,
        prediction,
        profile_of,
    )
    from stallscope.predict._report import as_json

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PredictWarning)  # shown with the table instead
            prof = profile_of(run)
        m = prof.measured
        if measured_network:
            m.network = measured_network
        node_list = _ints(nodes, "--nodes") if nodes else [m.nodes]
        networks = [v.strip() for v in network.split(",")] if network else [None]
        per_list = (
            _ints(ranks_per_node, "--ranks-per-node") if ranks_per_node else [m.ranks_per_node]
        )
        targets = [
            Target(
                n,
                g,
                r,
                network=net,
                device=device,
                compute_scale=compute_scale,
                strategy=strategy,
                accumulation=accumulation,
            )
            for n, g, r, net in itertools.product(node_list, per_list, _rates(rate), networks)
        ]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PredictWarning)
            pred = prediction(
                prof,
                targets,
                calibration=None if calibration is None else str(calibration),
                mtu=mtu,
            )
    except NoPeakError as e:
        raise click.ClickException(e.advice("--compute-scale RATIO")) from None
    except PredictError as e:
        raise click.ClickException(str(e)) from None
    from stallscope.cli._paths import output_file, write_error

    try:
        if save_profile is not None:
            prof.save(output_file(save_profile))
        if json_path is not None:
            output_file(json_path).write_bytes(
                orjson.dumps(as_json(prof, pred), option=orjson.OPT_INDENT_2) + b"\n"
            )
    except OSError as e:
        raise write_error(Path(e.filename or "the output"), e) from None
    print_prediction(run, prof, pred)
    if save_profile is not None:
        click.echo(f"profile written to {save_profile}")
    if json_path is not None:
        click.echo(f"prediction written to {json_path}")
