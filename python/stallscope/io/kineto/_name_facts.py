"""Facts about each distinct event name of an import (the native reader's name dictionary):
its ProfilerStep number and its category as a GPU activity.

A dictionary holds hundreds to a few thousand names. Polars' regexes cost ~5-8 ms per import
in a fresh process (compiling and planning, whatever the size), Python's re about 2 µs per name:
small dictionaries go through Python, large ones through Polars. The patterns use ASCII classes
only, so both engines give the same answers (a test holds this on generated names)."""

from __future__ import annotations

import re
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope._schema import CATEGORY_ID
from stallscope._schema._classify import gpu_category, gpu_category_of
from stallscope.io.kineto._convert import NULL, STEP_RE

PYTHON_MAX: Final = 4096  # names up to this many are matched by Python's re
_STEP: Final = re.compile(STEP_RE)
_I64_MAX: Final = 2**63 - 1


def name_facts(
    names: list[str], python_max: int = PYTHON_MAX
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(step number per name, NULL where none; CATEGORY code per name as a GPU activity)."""
    if len(names) > python_max:
        facts = (
            pl.Series("n", names, dtype=pl.String)
            .to_frame()
            .select(
                step=pl.col("n")
                .str.extract(STEP_RE, 1)
                .cast(pl.Int64, strict=False)
                .fill_null(NULL),
                gpu=gpu_category(pl.col("n")).replace_strict(CATEGORY_ID, return_dtype=pl.UInt8),
            )
        )
        return facts["step"].to_numpy(), facts["gpu"].to_numpy()
    step = np.array([_step(n) for n in names], dtype=np.int64)
    gpu = np.array([CATEGORY_ID[gpu_category_of(n)] for n in names], dtype=np.uint8)
    return step, gpu


def _step(name: str) -> int:
    m = _STEP.search(name)
    if m is None:
        return NULL
    v = int(m.group(1))
    return v if v <= _I64_MAX else NULL  # Polars' cast: null on overflow
