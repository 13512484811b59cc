"""`stallscope recommend RUN`: the cheapest cloud configuration that finishes the work within a
time budget, or the fastest within a cost budget, predicted from the measured run."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import click

from stallscope.cli.plan import STACK_HELP

_PATH = click.Path(exists=True, dir_okay=False, path_type=Path)


def _split(values: tuple[str, ...]) -> list[str]:
    """ "a,b" "c" -> [a, b, c]."""
    return [v.strip() for arg in values for v in arg.split(",") if v.strip()]


@click.command(short_help="The cheapest cloud setup that finishes a job in time.")
@click.argument("run", nargs=-1, required=False, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--model",
    "model",
    default=None,
    help="Instead of RUN: a large model never run (a preset, a JSON file or a Hugging Face "
    "config.json), planned on every configuration in the fastest parallel layout that fits "
    "(stallscope plan); the work in --tokens or --steps of --global-batch sequences.",
)
@click.option(
    "--stack",
    default=None,
    help="With --model, on every configuration: " + STACK_HELP[0].lower() + STACK_HELP[1:],
)
@click.option(
    "--anchor",
    "anchors",
    multiple=True,
    type=_PATH,
    metavar="FILE",
    help="With --model: a system file saved by `stallscope predict ... --measured-step S "
    "--save-system FILE`; its GPU's GEMMs and attention run at the rate the measured step "
    "showed on every configuration of that GPU (repeat for several GPUs).",
)
@click.option("--steps", type=float, help="Work: optimizer steps of the global batch.")
@click.option("--samples", type=float, help="Work: samples (needs --batch-size).")
@click.option(
    "--tokens",
    type=float,
    help="Work: tokens (needs --batch-size and --seq-len; with --model, neither).",
)
@click.option(
    "--epochs", type=float, help="Work: epochs (needs --batch-size and --dataset-samples)."
)
@click.option(
    "--time-budget",
    metavar="DURATION",
    help="Find the cheapest configuration that finishes within it (24h, 90m, 2d).",
)
@click.option(
    "--cost-budget", metavar="DOLLARS", help="Find the fastest configuration within it (5000)."
)
@click.option("--batch-size", type=int, help="Samples per rank per step, as measured.")
@click.option(
    "--global-batch",
    type=int,
    help="Samples per optimizer step to keep on every configuration (ranks x --batch-size x "
    "accumulation). Default: each rank keeps its batch, the global batch grows with the ranks.",
)
@click.option(
    "--seq-len",
    type=int,
    help="Tokens per sample (for --tokens); with --model, the sequence length it trains at.",
)
@click.option("--dataset-samples", type=int, help="Samples per epoch (for --epochs).")
@click.option(
    "--memory-gb", type=float, help="GPU memory the job needs per GPU; smaller GPUs are left out."
)
@click.option(
    "--gpu", "gpus", multiple=True, metavar="NAME[,NAME]", help="Only these GPUs (H100, A100-80GB)."
)
@click.option(
    "--cloud", "clouds", multiple=True, metavar="CLOUD[,CLOUD]", help="Only these clouds."
)
@click.option("--region", help="Only this region (us-east-1).")
@click.option(
    "--catalog", "catalog_file", type=_PATH, help="An instance catalog instead of the shipped one."
)
@click.option("--prices", type=_PATH, help="Current prices for some catalog rows.")
@click.option(
    "--max-instances",
    type=click.IntRange(1, 4096),
    default=16,
    show_default=True,
    help="Instances of one type in a configuration.",
)
@click.option("--spot", is_flag=True, help="Also price spot instances, with interruptions.")
@click.option(
    "--checkpoint-interval",
    metavar="DURATION",
    default="1h",
    show_default=True,
    help="Spot: work between checkpoints.",
)
@click.option(
    "--restart",
    metavar="DURATION",
    default="15m",
    show_default=True,
    help="Spot: time lost per interruption besides the work since the checkpoint.",
)
@click.option(
    "--interruption-rate",
    type=float,
    help="Spot: interruptions per instance-hour for every instance type (instead of the "
    "published bands).",
)
@click.option("--interruptions", type=_PATH, help="Spot: a table of interruption rates.")
@click.option(
    "--max-risk",
    type=float,
    default=0.1,
    show_default=True,
    help="Spot: the highest probability of missing the time budget that still meets it.",
)
@click.option("--mix", is_flag=True, help="Also try two instance types in one job.")
@click.option(
    "--measured-network",
    metavar="NAME",
    help="The network between the measured run's nodes, from the link table (e.g. ib-hdr): "
    "prices its collectives when their sizes must be estimated from their times.",
)
@click.option(
    "--measured-device",
    metavar="GPU",
    help="For a run on CPU threads: the GPU its compute times stand for.",
)
@click.option(
    "--precision",
    default=None,
    help="With --measured-device: the precision whose matmul rates scale compute (default "
    "fp32); with --model: the training precision (bf16, fp16, fp8, nvfp4; default bf16).",
)
@click.option(
    "--compute-scale",
    "compute_scales",
    multiple=True,
    metavar="GPU=RATIO",
    help="A measured ratio of compute time on GPU to the run's (e.g. A10G=1.7), for a GPU the "
    "device table cannot scale to; repeat for several.",
)
@click.option(
    "--top", type=click.IntRange(1, 10_000), default=10, show_default=True, help="Rows shown."
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write best, pareto, candidates and what was left out as JSON (- for stdout).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Draw the configurations' time against cost, the Pareto front marked (.svg or .png; "
    "needs matplotlib).",
)
def recommend(run: tuple[Path, ...], **o: Any) -> None:
    """The cheapest cloud configuration for the measured job RUN (a run directory or Kineto
    traces) that finishes the work within --time-budget, or the fastest within --cost-budget.
    With --model instead of RUN, a large model never run, each configuration in the parallel
    layout the planner finds fastest.

    \b
        stallscope recommend runs/job --steps 100000 --time-budget 24h
        stallscope recommend runs/job --steps 100000 --cost-budget 5000 --spot --mix
        stallscope recommend --model llama3-8b --tokens 1e11 --global-batch 512 \\
            --time-budget 30d --max-instances 8
    """
    from stallscope.cli.recommend_render import print_recommendation, write_json
    from stallscope.exceptions import StallscopeError
    from stallscope.recommend import Job, NoCandidateError, SpotModel, recommendation
    from stallscope.recommend._budgets import hours
    from stallscope.recommend._profile_predictor import predictor_for

    planned = _mode(run, o)
    what: list[Path | str] = [f"{o['model']} (planned)"] if planned else list(run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if planned:
                from stallscope.recommend import PlanPredictor
                from stallscope.recommend._plan_predictor import anchor_factors

                predictor: Any = PlanPredictor(
                    o["model"],
                    global_batch=o["global_batch"],
                    precision=o["precision"] or "bf16",
                    stack=o["stack"],
                    seq_len=o["seq_len"],
                    compute_factors=anchor_factors(o["anchors"]),
                )
                job = predictor.job
            else:
                predictor = predictor_for(
                    list(run),
                    measured_device=o["measured_device"],
                    measured_network=o["measured_network"],
                    precision=o["precision"] or "fp32",
                    compute_scales=_ratios(o["compute_scales"]),
                )
                job = Job(
                    batch_size=o["batch_size"],
                    global_batch=o["global_batch"],
                    seq_len=o["seq_len"],
                    dataset_samples=o["dataset_samples"],
                    memory_gb=o["memory_gb"],
                )
            rec = recommendation(
                predictor,
                steps=o["steps"],
                samples=o["samples"],
                tokens=o["tokens"],
                epochs=o["epochs"],
                time_budget=o["time_budget"],
                cost_budget=o["cost_budget"],
                job=job,
                catalog=o["catalog_file"],
                prices=o["prices"],
                gpus=_split(o["gpus"]) or None,
                clouds=_split(o["clouds"]) or None,
                region=o["region"],
                spot=o["spot"],
                spot_model=SpotModel(
                    hours(o["checkpoint_interval"], "checkpoint interval"),
                    hours(o["restart"], "restart time", zero=True),
                ),
                interruptions=o["interruptions"],
                interruption_rate=o["interruption_rate"],
                max_risk=o["max_risk"],
                mix=o["mix"],
                max_instances=o["max_instances"],
            )
        except NoCandidateError as e:
            _echo_warnings(caught)
            raise click.ClickException(str(e)) from None
        except StallscopeError as e:
            _echo_warnings(caught)
            raise click.ClickException(str(e)) from None
    _echo_warnings(caught)
    to_stdout = o["json_file"] is not None and str(o["json_file"]) == "-"
    if o["json_file"] is not None:
        write_json(rec, o["json_file"], what)
    if o["plot"] is not None:
        from stallscope.cli._paths import output_file
        from stallscope.report import pareto_plot

        output_file(o["plot"])
        try:
            pareto_plot(
                rec.candidates,
                o["plot"],
                title=rec.objective[0].upper() + rec.objective[1:],
                time_budget_hours=rec.time_budget_hours,
                cost_budget=rec.cost_budget,
            )
        except StallscopeError as e:
            raise click.ClickException(str(e)) from None
        click.echo(f"wrote {o['plot']}", err=True)
    if not to_stdout:
        print_recommendation(rec, what, o["top"])


#: Options of a measured run that a planned model does not take, and why.
_RUN_ONLY = {
    "batch_size": "the planner chooses the micro-batch; give --global-batch",
    "memory_gb": "the planner checks each layout's memory itself",
    "dataset_samples": "give the work in --tokens, --samples or --steps",
    "epochs": "give the work in --tokens, --samples or --steps",
    "measured_device": "there is no measured run",
    "measured_network": "there is no measured run",
    "compute_scales": "there is no measured run",
    "mix": "the planner plans one GPU type per job",
}


def _mode(run: tuple[Path, ...], o: dict[str, Any]) -> bool:
    """Whether the job is a planned model (--model) rather than a measured RUN; refuses the
    options of the other mode."""
    if o["model"] is None:
        if not run:
            raise click.UsageError("give RUN (a measured job) or --model (a model to plan)")
        for name in ("stack", "anchors"):
            if o[name] not in (None, ()):
                flag = "--" + name.removesuffix("s")
                raise click.UsageError(f"{flag} is an option of --model (a planned model)")
        return False
    if run:
        raise click.UsageError("give RUN (a measured job) or --model, not both")
    for name, why in _RUN_ONLY.items():
        if o[name] not in (None, False, ()):
            flag = "--" + ("compute-scale" if name == "compute_scales" else name.replace("_", "-"))
            raise click.UsageError(f"{flag} is not taken with --model: {why}")
    return True


def _ratios(values: tuple[str, ...]) -> dict[str, float]:
    """("A10G=1.7", "L4=2") -> {"A10G": 1.7, "L4": 2.0}."""
    out: dict[str, float] = {}
    for v in _split(values):
        gpu, sep, ratio = v.partition("=")
        try:
            value = float(ratio) if sep and gpu.strip() else None
        except ValueError:
            value = None
        if value is None or not value > 0:
            raise click.BadParameter(
                f"{v!r}: give GPU=RATIO with a positive ratio, e.g. A10G=1.7",
                param_hint="--compute-scale",
            )
        out[gpu.strip()] = value
    return out


def _echo_warnings(caught: list[warnings.WarningMessage]) -> None:
    seen: set[str] = set()
    for w in caught:
        text = str(w.message)
        if text not in seen:
            seen.add(text)
            click.echo(f"warning: {text}", err=True)
