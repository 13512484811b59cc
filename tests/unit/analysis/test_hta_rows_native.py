"""HTA's rows of an events frame (`_core.hta_rows`, csrc/analysis/hta_rows.h), checked against
plain-Python references of HTA's rules on generated rows: the last-step filter (ranks without
steps, correlations shared by several CPU rows, GPU rows without a partner, -1 matching -1 as
in HTA's merge), each GPU row's launch time (the last CPU partner in row order, else the file's
first row), the µs times of float and integer traces, and bad input. The real traces' views are
checked against HTA itself in test_hta_views.py."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stallscope import _core
from stallscope._schema import KIND_ID
from stallscope._schema._classify import hta_kernel_type_of
from stallscope.analysis.hta._loading import _GPU_KIND, _HTA_KIND, SYNC_NAMES

Row = tuple[str, int, int, int, int, int, str]  # kind, rank, start, end, lane, corr, name


def _call(
    rows: list[Row],
    facts: list[tuple[int, int, bool, int | None]] | None = None,
    include_last_step: bool = False,
    gpu_only: bool = False,
) -> dict[str, np.ndarray[Any, Any]]:
    names = sorted({r[6] for r in rows}) or [""]
    code = {n: i for i, n in enumerate(names)}
    col = list(zip(*rows, strict=True)) if rows else [[]] * 7
    return _core.hta_rows(
        np.array([KIND_ID[k] for k in col[0]], np.uint8),
        np.array(col[1], np.int32),
        np.array(col[2], np.int64),
        np.array(col[3], np.int64),
        np.array(col[4], np.int32),
        np.array(col[5], np.int64),
        np.array([code[n] for n in col[6]], np.uint32),
        _HTA_KIND.astype(np.uint8),
        _GPU_KIND.astype(np.uint8),
        KIND_ID["runtime"],
        np.array([n in SYNC_NAMES for n in names], np.uint8),
        np.array(["ProfilerStep" in n for n in names], np.uint8),
        facts or [],
        include_last_step,
        gpu_only,
    )


def _rows(raw: list[tuple[int, bool, str, int, int]]) -> list[Row]:
    """(rank, is_gpu, name, ts µs, correlation or -1) -> input rows: CPU rows are runtime calls
    (their correlation counts), GPU rows kernels on stream 0; a GPU row without a correlation is
    an Event Sync (the only way HTA counts it a GPU row)."""
    out: list[Row] = []
    for rank, gpu, name, ts, corr in raw:
        if gpu:
            kind, name = "kernel", (name if corr != -1 else "Event Sync")
        else:
            kind = "runtime"
        out.append((kind, rank, ts * 1000, ts * 1000 + 500, 0, 0 if corr == -1 else corr, name))
    return out


def _last_step_reference(raw: list[tuple[int, bool, str, int, int]]) -> list[int]:
    """HTA's last-step filter in plain Python: positions kept, in HTA's order."""
    names = {("Event Sync" if g and c == -1 else n) for _, g, n, _, c in raw}
    if len({n for n in names if "ProfilerStep" in n}) < 2:
        return list(range(len(raw)))
    limit: dict[int, int] = {}
    for r, g, n, t, _ in raw:
        if not g and "ProfilerStep" in n:
            limit[r] = max(limit.get(r, t), t)
    cpu_kept = [j for j, (r, g, _, t, _) in enumerate(raw) if not g and r in limit and t < limit[r]]
    gpu_part = []
    for j, (r, g, _, _, c) in enumerate(raw):
        if g:
            gpu_part += [j] * sum(1 for k in cpu_kept if (raw[k][0], raw[k][4]) == (r, c))
    return gpu_part + cpu_kept


step_rows = st.lists(
    st.tuples(
        st.integers(0, 2),  # rank
        st.booleans(),  # is_gpu
        st.sampled_from(["ProfilerStep#1", "ProfilerStep#2", "aten::mm", "kernel"]),
        st.integers(0, 20),  # ts, µs
        # correlation (-1: none); 2**40 makes the keys too sparse for a direct table (hashed)
        st.sampled_from([-1, 1, 2, 3, 4, 2**40]),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(step_rows)
def test_last_step_filter_keeps_htas_rows_in_htas_order(
    raw: list[tuple[int, bool, str, int, int]],
) -> None:
    out = _call(_rows(raw))
    assert out["row"].tolist() == _last_step_reference(raw)
    assert out["is_gpu"].tolist() == [raw[j][1] for j in out["row"]]
    assert out["correlation"].tolist() == [raw[j][4] for j in out["row"]]
    assert out["stream"].tolist() == [0 if raw[j][1] else -1 for j in out["row"]]
    least = min((t for _, _, _, t, _ in raw), default=0)
    assert out["ts"].tolist() == [float(raw[j][3] - least) for j in out["row"]]
    # include_last_step keeps every row once, in row order
    assert _call(_rows(raw), include_last_step=True)["row"].tolist() == list(range(len(raw)))


launch_rows = st.lists(
    st.tuples(
        st.integers(0, 1),  # rank
        st.booleans(),  # is_gpu
        st.integers(0, 30),  # ts, µs
        st.sampled_from([-1, 1, 2, 3, 2**40]),  # correlation (-1: none; 2**40: hashed keys)
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(launch_rows, st.sampled_from([None, 0, 5_000]))
def test_launch_is_the_last_cpu_partner_else_the_files_first_row(
    raw: list[tuple[int, bool, int, int]], row0_ns: int | None
) -> None:
    rows = _rows([(r, g, "x", t, c) for r, g, t, c in raw])
    facts = [(0, 0, True, row0_ns)]  # rank 0's file; rank 1 has no trace mark
    out = _call(rows, facts, include_last_step=True)
    least = min(t for _, _, t, _ in raw)
    for j, (r, g, _, c) in enumerate(raw):
        got = out["runtime"][j]
        partners = [k for k, (r2, g2, _, c2) in enumerate(raw) if not g2 and (r2, c2) == (r, c)]
        if not g:
            want = math.nan
        elif partners and c != -1:
            want = float(raw[partners[-1]][2] - least)
        elif c != -1 and r == 0 and row0_ns is not None:
            want = math.ceil(row0_ns / 1000) - least
        else:
            want = math.nan
        assert (math.isnan(got) and math.isnan(want)) or got == want, (j, got, want)


mixed_rows = st.lists(
    st.tuples(
        st.sampled_from(["runtime", "kernel", "memcpy", "region"]),  # kind
        st.integers(0, 1),  # rank
        st.integers(0, 20),  # ts, µs
        st.sampled_from([-1, 0, 7]),  # lane: a GPU kind's stream (-1: none)
        st.sampled_from([0, 1, 2, 2**40]),  # correlation (0: none)
        st.sampled_from(["ProfilerStep#1", "ProfilerStep#2", "k", "Event Sync"]),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(mixed_rows, st.booleans())
def test_gpu_only_gives_the_rows_with_a_stream(
    raw: list[tuple[str, int, int, int, int, str]], include_last_step: bool
) -> None:
    rows: list[Row] = [(k, r, t * 1000, t * 1000 + 500, ln, c, n) for k, r, t, ln, c, n in raw]
    whole = _call(rows, include_last_step=include_last_step)
    gpu = _call(rows, include_last_step=include_last_step, gpu_only=True)
    keep = whole["stream"] != -1
    assert set(gpu) == set(whole)
    for key, value in whole.items():
        np.testing.assert_array_equal(gpu[key], value[keep], err_msg=key)  # NaN equals NaN


def test_float_and_integer_traces_get_htas_microseconds() -> None:
    base = 1_000_000
    rows: list[Row] = [
        ("region", 0, base + 1_500, base + 4_200, 0, 0, "a"),  # float: ceil 2, floor(1.5 + 2.7) 4
        ("region", 1, base - 1_500, base + 700, 0, 0, "b"),  # integer: -1.5 µs floors to -2
    ]
    out = _call(rows, [(0, base, True, None), (1, base, False, None)], include_last_step=True)
    # rank 0: ts 2, end 4; rank 1: ts -2, end -2 + 2.2; both shifted by the least ts (-2)
    assert out["ts"].tolist() == [4.0, 0.0]
    assert out["end"].tolist() == [6.0, (-2 + 2.2) + 2]


def test_rows_hta_does_not_have_are_left_out() -> None:
    rows: list[Row] = [
        ("mark", 0, 0, 0, 0, 0, "stallscope::trace"),
        ("region", 0, 1_000, 2_000, 0, 0, "a"),
        ("collective", 0, 1_000, 2_000, 0, 0, "allreduce"),
        ("kernel", 0, 1_500, 1_800, 7, 3, "k"),
    ]
    out = _call(rows, include_last_step=True)
    assert out["row"].tolist() == [1, 3]
    assert out["stream"].tolist() == [-1, 7]
    assert out["kind"].tolist() == [KIND_ID["region"], KIND_ID["kernel"]]


def test_no_rows_give_empty_arrays() -> None:
    out = _call([])
    assert all(v.size == 0 for v in out.values())


def test_codes_outside_the_tables_are_refused() -> None:
    good = _call([("region", 0, 0, 1, 0, 0, "a")])
    assert good["row"].tolist() == [0]
    z8, z32, z64 = np.zeros(1, np.uint8), np.zeros(1, np.int32), np.zeros(1, np.int64)
    one = np.ones(1, np.uint8)
    args: list[Any] = [z8, z32, z64, z64, z32, z64, np.array([5], np.uint32)]
    tables = [_HTA_KIND.astype(np.uint8), _GPU_KIND.astype(np.uint8), KIND_ID["runtime"]]
    with pytest.raises(ValueError, match="name code 5 outside the name tables"):
        _core.hta_rows(*args, *tables, one, one, [], False)
    args[0] = np.array([200], np.uint8)
    args[6] = np.zeros(1, np.uint32)
    with pytest.raises(ValueError, match="kind code 200 outside the kind tables"):
        _core.hta_rows(*args, *tables, one, one, [], False)
    args[0] = z8
    args[1] = np.zeros(2, np.int32)
    with pytest.raises(ValueError, match="rank has the wrong length"):
        _core.hta_rows(*args, *tables, one, one, [], False)


@pytest.mark.parametrize(
    ("name", "kernel_type"),
    [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", "COMMUNICATION"),
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "COMMUNICATION"),
        ("Memcpy HtoD (Pageable -> Device)", "MEMORY"),
        ("Memset (Device)", "MEMORY"),
        ("dma_copy", "MEMORY"),
        ("volta_sgemm_128x64_nn", "COMPUTATION"),
        ("Event Sync", "OTHER"),
        ("cudaMemcpyAsync", "OTHER"),  # contains Memcpy: not compute, not memory
        ("rcclKernel_x", "COMPUTATION"),  # HTA 0.5.0 knows nccl only
        ("ncclA\nKernel", "COMPUTATION"),  # `.` stops at a newline: not nccl...Kernel
        ("a\nSync", "COMPUTATION"),  # nor can `.*Sync` reach past one
        ("a Sync\nb", "OTHER"),
    ],
)
def test_kernel_types_are_htas(name: str, kernel_type: str) -> None:
    assert hta_kernel_type_of(name) == kernel_type
    assert _hta_regex_type(name) == kernel_type


def _hta_regex_type(name: str) -> str:
    """HTA 0.5.0's own rule: its regexes, applied with re.match as it does."""
    if re.match(r"^nccl.*Kernel", name):
        return "COMMUNICATION"
    if re.match(r"(^Memcpy)|(^Memset)|(^dma)", name):
        return "MEMORY"
    if not re.match(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)", name):
        return "COMPUTATION"
    return "OTHER"


PIECES = st.sampled_from(
    ["nccl", "Kernel", "Memcpy", "Memset", "dma", "Sync", "\n", "\r", " ", "x", "ncc", "Kern"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_kernel_types_equal_htas_regexes_on_generated_names(name: str) -> None:
    assert hta_kernel_type_of(name) == _hta_regex_type(name)
