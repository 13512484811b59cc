"""The native reader's per-name and per-category facts: Python's re (small dictionaries) and
Polars (large ones, and the general reader) must give the same answers."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope._schema import CATEGORIES
from stallscope.io.kineto._name_facts import NULL, name_facts
from stallscope.io.kineto._native import _WHITE_SPACE

# Pieces of the patterns, and characters the two engines' Unicode classes disagree on
# (U+001C-U+001F: Python's \s only; combining marks, U+203F, ZWJ: Rust's \w only; ½ and ²:
# Python's \w only; Arabic-Indic digits: \d in both, not integers to Polars).
_PIECES = [
    "ProfilerStep", "#", " ", "\t", "\n", "\x1c", "\u3000", "12", "007", "\u0661",
    "99999999999999999999", "9223372036854775807", "nccl", "rccl", "Kernel", "DevKernel",
    "ncclKernel", "Memcpy", "Memset", "dma", "hip", "Sync", "Stream Sync", "Event", "_",
    "Stream Wait Event", "Stream Wait", " Event",
    "\u0301", "\u203f", "\u200d", "\u00bd", "\u00b2", "a", "Z",
]  # fmt: skip
_name = st.lists(st.sampled_from(_PIECES), max_size=6).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_name, min_size=1, max_size=30))
def test_python_and_polars_agree(names: list[str]) -> None:
    py_step, py_gpu = name_facts(names, python_max=len(names))
    pl_step, pl_gpu = name_facts(names, python_max=-1)
    assert py_step.tolist() == pl_step.tolist()
    assert py_gpu.tolist() == pl_gpu.tolist()


def test_steps_and_categories_of_known_names() -> None:
    names = ["ProfilerStep#3", "ProfilerStep # 12", "ProfilerStep#\u0661", "ncclDevKernel_AllReduce",
             "Memcpy HtoD", "Stream Sync", "Stream Sync\n", "ProfilerStep#99999999999999999999"]  # fmt: skip
    for python_max in (len(names), -1):
        step, gpu = name_facts(names, python_max)
        assert step.tolist() == [3, 12, NULL, NULL, NULL, NULL, NULL, NULL]
        assert [CATEGORIES[g] for g in gpu] == [
            "compute", "compute", "compute", "comm", "memcpy", "sync", "compute", "compute"
        ]  # fmt: skip


def test_category_strip_is_polars_strip() -> None:
    chars = [chr(i) for i in range(0x3001)]
    polars = pl.Series([f"{c}a{c}" for c in chars]).str.strip_chars().to_list()
    ours = [f"{c}a{c}".strip(_WHITE_SPACE) for c in chars]
    assert ours == polars
