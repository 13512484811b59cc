"""The model mode of `stallscope predict`: a configuration never run, from the model's shape, the
parallel split and the system alone (``stallscope.plan.predict_model``). Its options and its
run live here; the predict verb registers them beside its measured-run mode, whose --nodes
(one number here) and --json they share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from stallscope.cli.plan import (
    MODEL_HELP,
    PRECISION_CHOICES,
    PRECISION_HELP,
    SEQ_LEN_HELP,
    STACK_HELP,
    SYSTEM_HELP,
    _write_json,
    calibration_note,
    efficiency_table_option,
    fp8_recipe_option,
    model_arg,
    moe_dispatcher_option,
    plan_errors,
    stack_arg,
    system_arg,
)

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--model", "model", default=None, help=MODEL_HELP),
    click.option("--system", "system", default=None, help=SYSTEM_HELP),
    click.option("--seq-len", type=click.IntRange(1), default=None, help=SEQ_LEN_HELP),
    efficiency_table_option,
    click.option("--gpus-per-node", type=click.IntRange(1), default=None, help="GPUs used per node (default: the system's)."),
    click.option("--tp", type=click.IntRange(1), default=1, show_default=True, help="Tensor-parallel size."),
    click.option("--pp", type=click.IntRange(1), default=1, show_default=True, help="Pipeline stages."),
    click.option("--cp", type=click.IntRange(1), default=1, show_default=True, help="Context-parallel size (ring attention)."),
    click.option("--dp", type=click.IntRange(1), default=None, help="Data-parallel size (default: the GPUs left)."),
    click.option("--ep", type=click.IntRange(1), default=1, show_default=True, help="Expert-parallel size of a mixture-of-experts model (its experts split over ep GPUs)."),
    click.option("--etp", type=click.IntRange(1), default=None, help="Expert tensor-parallel size: each expert's FFN split over etp GPUs (default: tp, as in Megatron-Core)."),
    click.option("--moe-load", type=click.FloatRange(1.0), default=1.0, show_default=True, help="The busiest expert-parallel GPU's routed tokens over the mean (1: balanced routing, as published MoE benchmarks force it)."),
    click.option("--micro-batch", type=click.IntRange(1), default=1, show_default=True, help="Sequences per micro-batch."),
    click.option("--global-batch", type=click.IntRange(1), default=None, help="Sequences per step."),
    click.option("--recompute", type=click.Choice(["none", "selective", "full"]), default="none", show_default=True),
    click.option("--recompute-modules", default=None, metavar="MODULES", help="Selective recompute's modules, comma-separated (Megatron-Core's --recompute-modules: core_attn, layernorm, mla_up_proj, mlp, moe_act, moe, shared_experts; or torchtitan's per-op policy, ops; default: the stack's); implies --recompute selective."),
    click.option("--sequence-parallel", is_flag=True, help="Megatron sequence parallelism (tp > 1)."),
    click.option("--p2p-overlap", is_flag=True, help="Pipeline sends behind compute (Megatron's --overlap-p2p-communication); default: they block the sender."),
    click.option("--zero", type=click.IntRange(0, 3), default=0, show_default=True, help="ZeRO stage."),
    click.option("--interleave", type=click.IntRange(1), default=1, show_default=True, help="Model chunks per pipeline stage (interleaved 1F1B)."),
    click.option("--first-stage-layers", type=click.IntRange(1), default=None, help="Layers of the first pipeline stage (Megatron's --decoder-first-pipeline-num-layers; default: the even split)."),
    click.option("--last-stage-layers", type=click.IntRange(1), default=None, help="Layers of the last pipeline stage (Megatron's --decoder-last-pipeline-num-layers; the middle stages split the rest)."),
    click.option("--embedding-as-layer", is_flag=True, help="The embedding takes one layer's place in the pipeline split: the first chunk of the first stage holds one layer fewer (Megatron-Core's account_for_embedding_in_pipeline_split)."),
    click.option("--loss-as-layer", is_flag=True, help="The loss takes one layer's place in the pipeline split: the last chunk of the last stage holds one layer fewer (Megatron-Core's account_for_loss_in_pipeline_split)."),
    click.option("--pipeline-layout", default=None, metavar="LAYOUT", help="Every pipeline chunk's layers in Megatron-Core's notation (--pipeline-model-parallel-layout): E embedding, t transformer layer, L loss, | between chunks in model order, (...)*n and x*n repeat; e.g. 'Et*3|(t*4|)*30,t*3L' for 126 layers on pp 16 with interleave 2."),
    click.option("--precision", type=click.Choice(PRECISION_CHOICES), default="bf16", show_default=True, help=PRECISION_HELP),
    click.option("--stack", "stack", default=None, help=STACK_HELP),
    fp8_recipe_option,
    moe_dispatcher_option,
    click.option("--measured-step", default=None, metavar="SECONDS|RUN", help="A measured step of this configuration on this system: seconds per optimizer step, or a measured run (a stallscope run directory, PyTorch profiler traces, a saved profile) whose median step it takes. Anchors the GEMM and attention rates on it (the compute factor that reproduces it) and predicts with them."),
    click.option("--save-system", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE", help="With --measured-step: write the system with its compute factor as a system file, for --system of plan, whatif and predict."),
    click.option("--parts", is_flag=True, help="Also print one layer's forward and backward part by part (what a per-layer profile of the job measures) and where the step goes, part by part."),
]  # fmt: skip


def model_mode_options(f: F) -> F:
    """Decorate a command with the model mode's own options (not --nodes and --json)."""
    for opt in reversed(_OPTIONS):
        f = opt(f)
    return f


def run_model_mode(
    model: str | None,
    system: str | None,
    seq_len: int | None,
    efficiency_table: Path | None,
    nodes: int | None,
    gpus_per_node: int | None,
    tp: int,
    pp: int,
    cp: int,
    dp: int | None,
    ep: int,
    etp: int | None,
    moe_load: float,
    micro_batch: int,
    global_batch: int | None,
    recompute: str,
    recompute_modules: str | None,
    sequence_parallel: bool,
    p2p_overlap: bool,
    zero: int,
    interleave: int,
    first_stage_layers: int | None,
    last_stage_layers: int | None,
    embedding_as_layer: bool,
    loss_as_layer: bool,
    pipeline_layout: str | None,
    precision: str,
    stack: str | None,
    fp8_recipe: str | None,
    moe_dispatcher: str | None,
    measured_step: str | None,
    save_system: Path | None,
    parts: bool,
    json_path: Path | None,
) -> None:
    """Predict the configuration; print its step and stalls, or write them as JSON."""
    from stallscope.plan import predict_model

    missing = [
        n
        for n, v in (
            ("--model", model),
            ("--system", system),
            ("--nodes", nodes),
            ("--global-batch", global_batch),
        )
        if v is None
    ]
    if missing:
        raise click.UsageError(f"the model mode of predict needs {', '.join(missing)}")
    if save_system is not None and measured_step is None:
        raise click.UsageError(
            "--save-system writes the system anchored on a measured step: give --measured-step"
        )
    assert (
        model is not None and system is not None and nodes is not None and global_batch is not None
    )
    modules = tuple(x.strip() for x in (recompute_modules or "").split(",") if x.strip())
    if modules and recompute == "none":
        recompute = "selective"  # the modules are selective recompute's
    with plan_errors():
        p = predict_model(
            model_arg(model, seq_len), system_arg(system, efficiency_table), nodes=nodes, gpus_per_node=gpus_per_node, tp=tp, pp=pp, cp=cp, dp=dp,
            micro_batch=micro_batch, global_batch=global_batch, recompute=recompute,
            sequence_parallel=sequence_parallel, p2p_overlap=p2p_overlap, zero=zero,
            interleave=interleave, first_stage_layers=first_stage_layers,
            last_stage_layers=last_stage_layers, embedding_as_layer=embedding_as_layer,
            loss_as_layer=loss_as_layer, pipeline_layout=pipeline_layout, precision=precision,
            stack=stack_arg(stack, fp8_recipe, precision, moe_dispatcher), ep=ep, etp=etp, moe_load=moe_load,
            recompute_modules=modules,
        )  # fmt: skip
    from stallscope.plan._accuracy import accuracy

    a = None
    if measured_step is not None:
        from stallscope.plan import anchor

        with plan_errors():
            a = anchor(p, measured_step)
        p = a.prediction
    doc: dict[str, Any] = {"mode": "model", "predictions": [p.to_dict()], "accuracy": accuracy()}
    if a is not None:
        doc["anchor"] = a.to_dict()
    fixes = None
    if not p.memory.fits:
        with plan_errors():
            fixes = p.memory_fixes()
        doc["memory_fixes"] = {"changes": fixes.to_dicts(), "min_gpus": p.min_gpus()}
    if save_system is not None and a is not None:
        from stallscope.plan._cluster import system_doc

        with plan_errors():
            base, _ = system_doc(system)
        if efficiency_table is not None:
            base["efficiency_table"] = str(efficiency_table.resolve())
        _write_json(a.system_doc(base), save_system)
    if json_path is not None:
        _write_json(doc, json_path)
        if str(json_path) == "-":
            return
    _print(p, a, save_system, fixes)
    if parts:
        _print_parts(p)
    calibration_note(p.system, efficiency_table, factor=a is None)


def _print_anchor(a: Any, saved: Path | None) -> None:
    where = f" ({a.measured_from})" if a.measured_from else ""
    click.echo(
        f"anchored on the measured {a.measured_step_s:.3f} s{where}: GEMMs and attention at "
        f"{a.factor:.3f} x the device model's rate (blind prediction "
        f"{a.blind.step_ns / 1e9:.3f} s, {100 * a.blind_error:+.1f} %)"
    )
    if saved is not None:
        click.echo(f"wrote {saved}: plan other configurations with --system {saved}")


def _print(p: Any, a: Any = None, saved: Path | None = None, fixes: Any = None) -> None:
    from stallscope.plan import STALL_COLUMNS

    d = p.to_dict()
    s = p.strategy
    click.echo(
        f"{p.model.name} on {s.gpus} x {p.system.device.name} ({p.system.name}): {s.label()}, "
        f"{s.micro_batches} micro-batches of {s.micro_batch}"
    )
    click.echo(
        f"step {d['step_ns'] / 1e9:.3f} s | {d['tokens_per_s']:,.0f} tokens/s "
        f"({d['tokens_per_s_per_gpu']:,.0f} per GPU) | {d['tflops_per_gpu']:.1f} TFLOP/s per GPU "
        f"| MFU {100 * d['mfu']:.1f} %"
    )
    if a is not None:
        _print_anchor(a, saved)
    cols = p.columns()
    parts = [
        f"{c.removesuffix('_ns').replace('_', ' ')} {cols[c] / 1e9:.3f}"
        for c in STALL_COLUMNS
        if cols[c]
    ]
    click.echo("per GPU, s per step: " + " | ".join(parts))
    lay = d["layer_ns"]  # the to_dict above computed it
    comm, ms = lay["parts"]["communication"], 1e-6
    click.echo(
        f"one layer, one micro-batch, ms: forward {lay['forward'] * ms:.2f} | backward "
        f"{lay['backward'] * ms:.2f} (recompute {lay['parts']['recompute'][1] * ms:.2f}) | "
        f"exposed communication {comm[0] * ms:.2f} / {comm[1] * ms:.2f}"
    )
    gib = 1 << 30
    mem = " | ".join(f"{k} {v / gib:.1f}" for k, v in d["memory_parts_bytes"].items() if v)
    click.echo(
        f"memory per GPU (stage {d['memory_stage']}): {d['memory_bytes'] / gib:.1f} GiB of {d['memory_capacity_bytes'] / gib:.0f} ({mem})"
    )
    if not d["fits"]:
        click.echo(f"does not fit: {d['memory_shortfall']}")
        _print_fixes(p, fixes)
    from stallscope.plan._accuracy import accuracy_note

    dev = p.system.device
    if note := accuracy_note(dev.name, p.model.moe, dev.compute_factor != 1):
        click.echo(note)


def _print_fixes(p: Any, fixes: Any) -> None:
    """The memory savers that make ``p``'s configuration fit on its GPUs (``fixes``:
    ``Prediction.memory_fixes``), or how many GPUs the job needs at least."""
    fit = fixes.filter("fits").head(3)
    if fit.height:
        said = "; ".join(
            f"{r['change']} ({r['memory_GiB']:.1f} GiB, step {r['step_s']:.3f} s)"
            for r in fit.iter_rows(named=True)
        )
        click.echo(f"fits with: {said}")
        return
    least = fixes.sort("memory_GiB").head(1)
    if least.height:
        r = least.row(0, named=True)
        click.echo(
            f"no memory saver makes it fit on these {p.strategy.gpus} GPUs (the least: "
            f"{r['change']}, {r['memory_GiB']:.1f} GiB)"
        )
    n = p.min_gpus()
    click.echo(
        f"the weights, gradients and optimizer state alone need at least {n} GPUs of "
        f"{p.system.device.hbm_GB:.0f} GB; search configurations that fit with stallscope plan "
        f"--gpus N (N >= {n}) and the same --model and --system"
    )


def _print_parts(p: Any) -> None:
    import polars as pl

    from stallscope.cli.render import print_frame

    lay = p.layer().filter((pl.col("forward_s") > 0) | (pl.col("backward_s") > 0))
    lay = lay.with_columns(pl.col("forward_s", "backward_s") * 1e3)
    click.echo()
    print_frame(
        lay,
        title="one layer, one micro-batch, one GPU (backward with recompute)",
        digits=3,
        labels={"forward_s": "forward ms", "backward_s": "backward ms"},
    )
    step = p.parts().filter(pl.col("seconds") > 0).with_columns(pl.col("share") * 100)
    print_frame(
        step,
        title="the step, per GPU (mean over pipeline stages)",
        digits={"seconds": 3, "share": 1},
        labels={"seconds": "s", "share": "%"},
    )
