"""Output paths of the CLI verbs: parent folders are created, and a path that cannot be written
is a clear error, never a traceback."""

from __future__ import annotations

from pathlib import Path

import click


def output_file(path: Path) -> Path:
    """`path` (a file to write) with its parent folders created; ClickException naming the fix
    when they cannot be, or when `path` is a folder."""
    if path.is_dir():
        raise click.ClickException(f"{path} is a folder; give a file name to write")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise click.ClickException(
            f"cannot create the folder {path.parent} for {path.name}: {e.strerror or e}; "
            "choose another path"
        ) from None
    return path


def output_dir(path: Path) -> Path:
    """`path` (a folder to write into) created with its parents; ClickException when it cannot
    be, or when it is a file."""
    if path.exists() and not path.is_dir():
        raise click.ClickException(f"{path} is a file; give a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise click.ClickException(
            f"cannot create the folder {path}: {e.strerror or e}; choose another path"
        ) from None
    return path


def write_error(path: Path, e: OSError) -> click.ClickException:
    """The error for a file that could not be written."""
    return click.ClickException(f"cannot write {path}: {e.strerror or e}; choose another path")
