"""`stallscope plan` (search the parallel configuration of a large-model training job) and
`stallscope whatif` (the best configuration when one figure of the cluster changes)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

MODEL_HELP = "A model JSON file (layers, hidden, heads, seq_len, vocab, ...) or a preset name."
SEQ_LEN_HELP = (
    "Tokens per sequence trained (default: the model's seq_len; a preset's is its released "
    "context, 131,072 for Llama 3.1, which pre-training rarely uses)."
)
SYSTEM_HELP = (
    "A system JSON file (gpu, gpus_per_node, intra_node_GBps, inter_node_Gbps) or a preset name."
)
STACK_HELP = (
    "The training software: a preset (megatron-core, megatron-lm-2021, megatron-deepspeed-2021, "
    "nemo-24, nemo-25, llm-foundry-2023, torchtitan-2024) or a JSON file of its fields."
)


FP8_RECIPE_HELP = (
    "The FP8 recipe, in place of the stack's: delayed (an amax history), current (per-tensor "
    "current scaling), dynamic (torchao) or mxfp8 (block scaling, Blackwell)."
)
#: The recipes --fp8-recipe offers (stallscope.plan._stack.FP8_RECIPES).
FP8_RECIPE_CHOICES = ("delayed", "current", "dynamic", "mxfp8")
#: The training precisions the planner times (``plan._strategy.PRECISIONS``).
PRECISION_CHOICES = ("bf16", "fp16", "fp8", "nvfp4")
PRECISION_HELP = (
    "The transformer layers' GEMMs: bf16, fp16, fp8 (under the stack's FP8 recipe) or nvfp4 "
    "(NVFP4 block scaling, Blackwell); attention and the output layer stay in 16 bit."
)
#: The dispatchers --moe-dispatcher offers (stallscope.plan._stack.MOE_DISPATCHERS).
MOE_DISPATCHER_CHOICES = ("alltoall", "flex")


MOE_DISPATCHER_HELP = (
    "The token dispatcher of a mixture-of-experts model, in place of the stack's: alltoall (one "
    "copy per token and chosen expert) or flex (DeepEP / HybridEP: a token once per GPU, and "
    "across nodes once per node, holding one of its experts)."
)


def stack_arg(
    text: str | None,
    fp8_recipe: str | None = None,
    precision: str = "fp8",
    moe_dispatcher: str | None = None,
) -> Any:
    """A stack preset's name, or the Stack of a JSON file of its fields (None: the default),
    with ``fp8_recipe`` (an FP8 precision only) and ``moe_dispatcher`` in place of its own when
    given."""
    from dataclasses import replace

    if fp8_recipe is not None and precision != "fp8":
        raise click.BadParameter(
            f"an FP8 recipe applies to --precision fp8, not {precision}: add --precision fp8 "
            "or leave --fp8-recipe out",
            param_hint="--fp8-recipe",
        )

    from stallscope.plan import DEFAULT_STACK, PlanError, load_stack
    from stallscope.plan._model import _read_json

    path = Path(text) if text is not None else None
    if path is not None and (path.suffix == ".json" or path.exists()):
        st = load_stack(_read_json(path, "stack"))  # its errors: the file's (exit 1)
    else:
        try:
            st = load_stack(text or DEFAULT_STACK)
        except PlanError as e:
            raise click.BadParameter(str(e), param_hint="--stack") from None
    if fp8_recipe is not None and fp8_recipe != st.fp8_recipe:
        st = replace(st, name=f"{st.name}+{fp8_recipe}", fp8_recipe=fp8_recipe)
    if moe_dispatcher is not None and moe_dispatcher != st.moe_dispatcher:
        st = replace(st, name=f"{st.name}+{moe_dispatcher}", moe_dispatcher=moe_dispatcher)
    return st


fp8_recipe_option = click.option(
    "--fp8-recipe", type=click.Choice(FP8_RECIPE_CHOICES), default=None, help=FP8_RECIPE_HELP
)
moe_dispatcher_option = click.option(
    "--moe-dispatcher",
    type=click.Choice(MOE_DISPATCHER_CHOICES),
    default=None,
    help=MOE_DISPATCHER_HELP,
)


SPLIT_HELP = (
    "Pipeline splits to try, comma-separated: even, Megatron-Core's with the embedding "
    "and / or the loss in a layer's place (embedding, loss, embedding+loss), and uneven: first "
    "and last stage layer counts where pp does not divide the layers (61 on 16 stages: 3, "
    "4 x 14, 2)."
)


def split_arg(text: str) -> tuple[str, ...]:
    """The --pipeline-split names; a BadParameter naming the valid ones."""
    from stallscope.plan._pipeline_split import SPLITS, UNEVEN

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in (*SPLITS, UNEVEN)]
    if bad or not names:
        raise click.BadParameter(
            f"{', '.join(bad) or '(none)'}: choose among {', '.join((*SPLITS, UNEVEN))}",
            param_hint="--pipeline-split",
        )
    return names


def cp_arg(text: str, what: str = "context-parallel", hint: str = "--cp") -> tuple[int, ...]:
    """The --cp (or --etp) sizes; a BadParameter naming what is wrong."""
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        sizes = ()
    if not sizes or any(c < 1 for c in sizes):
        raise click.BadParameter(
            f"{text!r}: give {what} sizes >= 1, comma-separated (e.g. 1,2,4)",
            param_hint=hint,
        )
    return tuple(sorted(set(sizes)))


def modules_arg(text: str) -> tuple[str, ...]:
    """The --recompute-modules names (the search checks them against the model)."""
    return tuple(x.strip() for x in text.split(",") if x.strip())


def etp_arg(text: str) -> tuple[int, ...]:
    """The --etp sizes."""
    return cp_arg(text, "expert tensor-parallel", "--etp")


def split_option(f: F) -> F:
    """--pipeline-split, --cp and --etp: what the search may choose beyond tp, pp, dp and the
    rest."""
    f = click.option(
        "--recompute-modules", "recompute_modules", default="", metavar="MODULES",
        help="Modules that selective recompute recomputes, comma-separated (Megatron-Core's "
        "--recompute-modules: core_attn, layernorm, mla_up_proj, mlp, moe_act, moe, "
        "shared_experts; or torchtitan's per-op policy, ops; default: the stack's).",
    )(f)  # fmt: skip
    f = click.option(
        "--moe-load", "moe_load", type=click.FloatRange(1.0), default=1.0, show_default=True,
        help="The busiest expert-parallel GPU's routed tokens over the mean, for a "
        "mixture-of-experts model (1: balanced routing, as published MoE benchmarks force it).",
    )(f)  # fmt: skip
    f = click.option(
        "--etp", "etp", default="1", show_default=True,
        help="Expert tensor-parallel sizes to try for a mixture-of-experts model, "
        "comma-separated (each expert's FFN split over etp GPUs; expert-parallel sizes are "
        "searched).",
    )(f)  # fmt: skip
    f = click.option(
        "--cp", "cp", default="1", show_default=True,
        help="Context-parallel sizes to try, comma-separated (ring attention over each "
        "sequence's tokens; e.g. 1,2,4 for long sequences).",
    )(f)  # fmt: skip
    return click.option(
        "--pipeline-split", "pipeline_split", default="even,embedding+loss,uneven",
        show_default=True,
        help=SPLIT_HELP,
    )(f)  # fmt: skip


@contextmanager
def plan_errors() -> Iterator[None]:
    """A planner error becomes a one-line message and exit status 1, never a traceback."""
    from stallscope.exceptions import StallscopeError

    try:
        yield
    except StallscopeError as e:
        raise click.ClickException(str(e)) from None


EFFICIENCY_TABLE_HELP = (
    "Calibrate the GPU with a measured table (bench/gpu_device_model.py's JSON) or a PyTorch "
    "profiler trace of your job on it, recorded with record_shapes=True (JSON or .json.gz, or "
    "a folder of them, one per rank): "
    "its GEMM, attention and copy times replace the built-in efficiencies."
)
efficiency_table_option = click.option(
    "--efficiency-table", "efficiency_table", type=click.Path(exists=True, path_type=Path),
    default=None, help=EFFICIENCY_TABLE_HELP,
)  # fmt: skip


def calibration_note(system: Any, efficiency_table: Path | None, factor: bool = True) -> None:
    """Print what ``--efficiency-table`` calibrated and the system's anchored compute factor,
    so that a user sees their table and their anchor used."""
    basis = system.device.basis
    if efficiency_table is not None:
        parts = [basis[k] for k in ("matmul", "attention", "hbm") if k in basis]
        click.echo(f"GPU timed by {efficiency_table.name}: " + "; ".join(parts))
    if factor and system.device.compute_factor != 1:
        click.echo(f"compute factor of {system.name}: {basis.get('compute', '')}")


def system_arg(system: str, efficiency_table: Path | None) -> Any:
    """The Cluster of ``--system``, its GPU calibrated by ``--efficiency-table`` when given."""
    from stallscope.plan import load_system

    return load_system(system, efficiency_table=efficiency_table)


def model_system_options(f: F) -> F:
    f = efficiency_table_option(f)
    f = click.option("--seq-len", type=click.IntRange(1), default=None, help=SEQ_LEN_HELP)(f)
    f = click.option("--system", "system", required=True, help=SYSTEM_HELP)(f)
    return click.option("--model", "model", required=True, help=MODEL_HELP)(f)


def model_arg(model: str, seq_len: int | None) -> Any:
    """The Model of ``--model``, trained at ``--seq-len`` tokens per sequence when given."""
    from stallscope.plan import load_model

    m = load_model(model)
    return m if seq_len is None else load_model(m.to_dict() | {"seq_len": seq_len})


def _write_json(doc: Any, path: Path | None) -> None:
    import orjson

    data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n"
    if path is None or str(path) == "-":
        sys.stdout.buffer.write(data)
        return
    from stallscope.cli._paths import output_file

    try:
        output_file(path).write_bytes(data)
    except OSError as e:
        raise click.ClickException(f"cannot write {path}: {e}") from None


@click.command("plan", short_help="Rank every parallel layout of a model on a system by step time.")
@model_system_options
@click.option("--gpus", type=click.IntRange(1), required=True, help="GPUs of the job.")
@click.option(
    "--global-batch",
    type=click.IntRange(1),
    default=None,
    help="Sequences per step (default: about 4 M tokens, a power of two).",
)
@click.option(
    "--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="Rows shown."
)
@click.option(
    "--precision",
    type=click.Choice(PRECISION_CHOICES),
    default="bf16",
    show_default=True,
    help=PRECISION_HELP,
)
@click.option("--stack", "stack", default=None, help=STACK_HELP)
@fp8_recipe_option
@moe_dispatcher_option
@split_option
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the ranked table as JSON (- for stdout).",
)
def plan(
    model: str,
    system: str,
    seq_len: int | None,
    efficiency_table: Path | None,
    gpus: int,
    global_batch: int | None,
    top: int,
    precision: str,
    stack: str | None,
    fp8_recipe: str | None,
    moe_dispatcher: str | None,
    pipeline_split: str,
    cp: str,
    etp: str,
    moe_load: float,
    recompute_modules: str,
    json_path: Path | None,
) -> None:
    """Rank every parallel configuration (tp, pp, dp, micro-batch, recompute, sequence
    parallel, ZeRO stage, interleave, pipeline split) of a training job that fits in memory, by predicted step
    time."""
    from stallscope.cli.render import print_frame
    from stallscope.plan._accuracy import accuracy
    from stallscope.plan._search import Space, search

    with plan_errors():
        m, s = model_arg(model, seq_len), system_arg(system, efficiency_table)
        sw = stack_arg(stack, fp8_recipe, precision, moe_dispatcher)
        space = Space(
            precision=precision, stack=sw, pipeline_split=split_arg(pipeline_split),
            context_parallel=cp_arg(cp), expert_tp=etp_arg(etp), moe_load=moe_load,
            recompute_modules=modules_arg(recompute_modules),
        )  # fmt: skip
        result = search(m, s, gpus, global_batch, top, space)
    t = result.table
    if json_path is not None:
        _write_json(
            {
                "model": m.to_dict(),
                "system": s.to_dict(),
                "gpus": gpus,
                "global_batch": int(t["global_batch"][0]),
                "enumerated": result.enumerated,
                "fitting": result.fitting,
                "seconds": result.seconds,
                "configurations": [p.to_dict() for p in result.best],
                "accuracy": accuracy(),
            },
            json_path,
        )
        if str(json_path) == "-":
            return
    split = ["split"] if (t["split"] != "even").any() else []  # shown where a row is uneven
    cps = ["cp"] if (t["cp"] > 1).any() else []
    experts = ["ep", "etp"] if "ep" in t.columns else []  # a mixture-of-experts model's split
    shown = t.select(
        "rank", "tp", "pp", *cps, "dp", *experts, "micro_batch", "interleave", *split, "recompute",
        "sequence_parallel", "zero", (t["step_s"]).alias("step_s"), "tokens_per_s_per_gpu",
        (t["mfu"] * 100).alias("mfu_%"), "memory_GiB", "bubble_s", "interconnect_s", "network_s",
    )  # fmt: skip
    labels = {
        "micro_batch": "mb", "interleave": "v", "recompute": "recompute",
        "sequence_parallel": "sp", "zero": "ZeRO", "step_s": "step s",
        "tokens_per_s_per_gpu": "tokens/s /GPU", "mfu_%": "MFU %", "memory_GiB": "mem GiB",
        "bubble_s": "bubble s", "interconnect_s": "nvlink s", "network_s": "network s",
    }  # fmt: skip
    digits = {"step_s": 3, "tokens_per_s_per_gpu": 0, "mfu_%": 1, "memory_GiB": 1} | dict.fromkeys(
        ("bubble_s", "interconnect_s", "network_s"), 3
    )
    print_frame(
        shown,
        title=f"{m.name} on {gpus} x {s.device.name} ({s.name}), global batch "
        f"{int(t['global_batch'][0])} x {m.seq_len} tokens: top {t.height} of {result.fitting} "
        f"that fit ({result.enumerated} tried)",
        digits=digits,
        labels=labels,
    )
    click.echo(
        f"searched in {result.seconds:.2f} s; columns in seconds per step, per GPU (mean over stages)"
    )
    from stallscope.plan._accuracy import accuracy_note

    calibration_note(s, efficiency_table)
    if note := accuracy_note(s.device.name, m.moe, s.device.compute_factor != 1):
        click.echo(note)


@click.command(
    "whatif", short_help="The best layout's step time as one figure of the system scales."
)
@model_system_options
@click.option("--gpus", type=click.IntRange(1), required=True, help="GPUs of the job.")
@click.option("--global-batch", type=click.IntRange(1), default=None, help="Sequences per step.")
@click.option(
    "--precision",
    type=click.Choice(PRECISION_CHOICES),
    default="bf16",
    show_default=True,
    help=PRECISION_HELP,
)
@click.option("--stack", "stack", default=None, help=STACK_HELP)
@fp8_recipe_option
@moe_dispatcher_option
@split_option
@click.option(
    "--knob",
    "knobs",
    multiple=True,
    help="NAME=F1,F2,...: scale one figure (compute, hbm_capacity, hbm_bandwidth, "
    "nvlink_domain, nic, nvlink_bandwidth); repeatable. Default: the first five at 0.5,1,2.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Draw the table (.svg, .png, .pdf; needs matplotlib).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the table as JSON (- for stdout).",
)
def whatif(
    model: str,
    system: str,
    seq_len: int | None,
    efficiency_table: Path | None,
    gpus: int,
    global_batch: int | None,
    precision: str,
    stack: str | None,
    fp8_recipe: str | None,
    moe_dispatcher: str | None,
    pipeline_split: str,
    cp: str,
    etp: str,
    moe_load: float,
    recompute_modules: str,
    knobs: tuple[str, ...],
    plot_path: Path | None,
    json_path: Path | None,
) -> None:
    """The best configuration's step time when one figure of the cluster is scaled."""
    from stallscope.cli.render import print_frame
    from stallscope.plan._plot import plot_whatif
    from stallscope.plan._search import Space
    from stallscope.plan._whatif import parse_knob, whatif_table

    with plan_errors():
        parsed = dict(parse_knob(k) for k in knobs) or None
        m, s = model_arg(model, seq_len), system_arg(system, efficiency_table)
        space = Space(
            precision=precision, stack=stack_arg(stack, fp8_recipe, precision, moe_dispatcher), pipeline_split=split_arg(pipeline_split),
            context_parallel=cp_arg(cp), expert_tp=etp_arg(etp), moe_load=moe_load,
            recompute_modules=modules_arg(recompute_modules),
        )  # fmt: skip
        table = whatif_table(m, s, gpus, parsed, global_batch, space)
        if plot_path is not None:
            from stallscope.cli._paths import output_file

            output_file(plot_path)
            plot_whatif(table, plot_path, f"{m.name} on {gpus} x {s.device.name}")
    from stallscope.plan._accuracy import accuracy, accuracy_note

    if json_path is not None:
        doc = {"model": m.name, "system": s.name, "gpus": gpus, "rows": table.to_dicts()}
        _write_json(doc | {"accuracy": accuracy()}, json_path)
        if str(json_path) == "-":
            return
    print_frame(
        table.select(
            "knob",
            "factor",
            "step_s",
            "speedup",
            "tokens_per_s_per_gpu",
            (table["mfu"] * 100).alias("mfu_%"),
            "config",
        ),
        title=f"what-if: {m.name} on {gpus} x {s.device.name} ({s.name})",
        digits={"factor": 2, "step_s": 3, "speedup": 2, "tokens_per_s_per_gpu": 0, "mfu_%": 1},
        labels={"step_s": "step s", "tokens_per_s_per_gpu": "tokens/s /GPU", "mfu_%": "MFU %"},
    )
    if plot_path is not None:
        click.echo(f"plot: {plot_path}")
    calibration_note(s, efficiency_table)
    if note := accuracy_note(
        s.device.name, m.moe, s.device.compute_factor != 1
    ):  # the speed-ups are ratios; the step times carry its error
        click.echo(note)
