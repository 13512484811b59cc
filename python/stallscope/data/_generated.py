"""What the generated datasets share: a description file beside the data, written last (its
presence says the dataset is complete), and a lock so that every rank may ask for the dataset
at once while one of them writes it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from stallscope.exceptions import DataError

META: Final = "dataset.json"


def meta_of(root: Path) -> dict[str, Any] | None:
    """The description of the generated dataset in `root`, None when there is none."""
    try:
        meta: dict[str, Any] = json.loads((root / META).read_text())
    except (OSError, ValueError):
        return None
    return meta


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _clear(root: Path, kind: str) -> None:
    """Remove `root` if it is empty or another generated dataset (its META file); refuse to
    touch a folder of anything else."""
    if not root.exists():
        return
    if not (root / META).exists() and any(root.iterdir()):
        raise DataError(
            f"{root} exists and is not a generated {kind} dataset: choose an empty or new folder"
        )
    shutil.rmtree(root)


def generate(root: Path, meta: dict[str, Any], write: Callable[[Path], None]) -> Path:
    """`root` holding the dataset `meta` describes: as it is when it already does, else
    written by `write(folder)` into a temporary folder beside it, described, flushed to disk
    (so that a cold run can evict it) and renamed into place."""
    with _locked(root):
        if meta_of(root) == meta:
            return root
        _clear(root, str(meta.get("kind", "")))
        tmp = root.with_name(f".{root.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        write(tmp)
        (tmp / META).write_text(json.dumps(meta))  # last: the dataset is complete
        os.sync()
        tmp.rename(root)
    return root


def require(root: Path, kind: str, maker: str) -> dict[str, Any]:
    """The description of the generated `kind` dataset in `root`; DataError naming `maker`
    (the function that writes one) when there is none."""
    meta = meta_of(root)
    if meta is None or meta.get("kind") != kind:
        raise DataError(
            f"{root} is not a complete generated {kind} dataset (no {META}): create it with "
            f"stallscope.data.{maker}"
        )
    return meta
