"""The per-rank program of a training command: torchrun taken off, its sizes kept."""

from __future__ import annotations

import sys

import pytest

from stallscope.differential import Entry, entry_of
from stallscope.exceptions import AnalyzeError


def test_a_plain_program_is_kept_as_it_is() -> None:
    assert entry_of(["python", "train.py", "--lr", "0.1"]) == Entry(
        ("python", "train.py", "--lr", "0.1")
    )
    # an argument that merely looks like torchrun's module is the script's
    e = entry_of(["python", "train.py", "-m", "torch.distributed.run"])
    assert e.launcher is None


@pytest.mark.parametrize(
    ("command", "argv", "nodes", "per_node"),
    [
        (
            ["torchrun", "--nproc-per-node", "4", "train.py", "--x", "1"],
            (sys.executable, "train.py", "--x", "1"),
            None,
            4,
        ),
        (
            ["torchrun", "--nproc_per_node=2", "--nnodes=1:3", "--standalone", "t.py"],
            (sys.executable, "t.py"),
            3,
            2,
        ),
        (
            [
                "python",
                "-m",
                "torch.distributed.run",
                "--nnodes",
                "2",
                "--nproc-per-node",
                "auto",
                "-m",
                "pkg.train",
                "--steps",
                "5",
            ],
            (sys.executable, "-m", "pkg.train", "--steps", "5"),
            2,
            None,
        ),
        (
            ["/opt/bin/torchrun", "--no-python", "--rdzv-backend", "c10d", "--", "./job", "-v"],
            ("./job", "-v"),
            None,
            None,
        ),
        (
            ["torchrun", "-r", "3", "--tee=3", "--max-restarts", "0", "t.py"],
            (sys.executable, "t.py"),
            None,
            None,
        ),
    ],
)
def test_torchrun_is_taken_off(
    command: list[str], argv: tuple[str, ...], nodes: int | None, per_node: int | None
) -> None:
    e = entry_of(command)
    assert (e.argv, e.nodes, e.ranks_per_node) == (argv, nodes, per_node)
    assert e.launcher is not None


@pytest.mark.parametrize(
    ("command", "match"),
    [
        ([], "no training command: give it after --"),
        (["torchrun", "--weird-flag", "t.py"], "'--weird-flag' is not understood .*--nodes"),
        (["torchrun", "--nproc-per-node"], "lacks its value"),
        (["torchrun", "--nproc-per-node", "0", "t.py"], "'0' is not a positive count"),
        (["torchrun", "--standalone"], "no training script"),
    ],
)
def test_bad_commands_are_named(command: list[str], match: str) -> None:
    with pytest.raises(AnalyzeError, match=match):
        entry_of(command)
