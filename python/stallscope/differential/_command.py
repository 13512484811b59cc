"""The per-rank program of a training command. `stallscope analyze` places the ranks itself
(1 device, G devices in one node, G devices over N emulated nodes), so a torchrun launcher in
front of the program is taken off and what it said about the job's size kept as defaults."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from stallscope.exceptions import AnalyzeError

#: torchrun options that take a value (either spelling, `--opt value` or `--opt=value`).
_VALUED: Final = frozenset(
    {
        "nnodes",
        "nproc-per-node",
        "rdzv-backend",
        "rdzv-endpoint",
        "rdzv-id",
        "rdzv-conf",
        "max-restarts",
        "monitor-interval",
        "start-method",
        "role",
        "log-dir",
        "redirects",
        "tee",
        "local-ranks-filter",
        "node-rank",
        "master-addr",
        "master-port",
        "local-addr",
        "logs-specs",
        "event-log-handler",
    }
)
_SHORT_VALUED: Final = {"-r": "redirects", "-t": "tee"}
#: torchrun flags without a value.
_FLAGS: Final = frozenset({"standalone", "module", "no-python", "run-path", "local-rank"})
_MODULES: Final = ("torch.distributed.run", "torch.distributed.launch")


@dataclass(frozen=True)
class Entry:
    """The program every rank runs, and what a stripped torchrun said about the job.

    argv: the per-rank command; nodes / ranks_per_node: torchrun's --nnodes and
    --nproc-per-node (None when not given or no torchrun); launcher: the launcher taken off."""

    argv: tuple[str, ...]
    nodes: int | None = None
    ranks_per_node: int | None = None
    launcher: str | None = None


def _torchrun_args(command: Sequence[str]) -> list[str] | None:
    """The arguments after torchrun (or python -m torch.distributed.run / .launch), None when
    `command` does not start with one."""
    if not command:
        return None
    if Path(command[0]).name.startswith("torchrun"):
        return list(command[1:])
    for i, a in enumerate(command[:-1]):
        if a == "-m" and command[i + 1] in _MODULES:
            return list(command[i + 2 :])
        if not a.startswith("-") and i > 0:
            break  # the interpreter's script: not a launcher
    return None


def _count(name: str, value: str) -> int | None:
    v = value.strip()
    if v in ("auto", "gpu", "cpu", "xpu"):
        return None
    lo = v.split(":")[-1]  # --nnodes MIN:MAX: the largest
    if not lo.isdigit() or int(lo) < 1:
        raise AnalyzeError(f"torchrun --{name} {value!r} is not a positive count")
    return int(lo)


def entry_of(command: Sequence[str]) -> Entry:
    """The Entry of `command` (a python program, or torchrun in front of one)."""
    if not command:
        raise AnalyzeError(
            "no training command: give it after --, e.g. stallscope analyze -- python train.py"
        )
    args = _torchrun_args(command)
    if args is None:
        return Entry(tuple(command))
    opts: dict[str, str] = {}
    flags: set[str] = set()
    i = 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a in _SHORT_VALUED:
            name, value = _SHORT_VALUED[a], args[i + 1] if i + 1 < len(args) else None
            i += 2
        elif a == "-m":
            flags.add("module")
            i += 1
            continue
        else:
            name, _, inline = a.lstrip("-").partition("=")
            name = name.replace("_", "-")
            if name in _FLAGS:
                flags.add(name)
                i += 1
                continue
            if name not in _VALUED:
                raise AnalyzeError(
                    f"torchrun option {a!r} is not understood by stallscope analyze: run the "
                    "program directly (stallscope analyze -- python train.py ...) and give "
                    "the layout with --nodes / --ranks-per-node"
                )
            if inline:
                value, i = inline, i + 1
            else:
                value, i = (args[i + 1] if i + 1 < len(args) else None), i + 2
        if value is None:
            raise AnalyzeError(f"torchrun option {a!r} lacks its value")
        opts[name] = value
    rest = args[i:]
    if not rest:
        raise AnalyzeError("torchrun is given no training script to run")
    if "no-python" in flags:
        argv = tuple(rest)
    elif "module" in flags:
        argv = (sys.executable, "-m", *rest)
    else:
        argv = (sys.executable, *rest)
    return Entry(
        argv,
        nodes=_count("nnodes", opts["nnodes"]) if "nnodes" in opts else None,
        ranks_per_node=(
            _count("nproc-per-node", opts["nproc-per-node"]) if "nproc-per-node" in opts else None
        ),
        launcher=Path(command[0]).name
        if Path(command[0]).name.startswith("torchrun")
        else "torch.distributed.run",
    )
