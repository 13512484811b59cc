"""The writer gives GPU activity left unclassified by the CUPTI backend its category from the one
shared classifier (_classify.py), and leaves every other row's category as recorded."""

from __future__ import annotations

import numpy as np

from stallscope import _core
from stallscope._schema import CATEGORIES, KIND_ID
from stallscope._schema._classify import gpu_category_of
from stallscope.capture._writer import StringCache, chunk_to_table

UNCLASSIFIED = 0xFF  # csrc/cupti/activity_backend.h kCategoryUnclassified


def test_unclassified_rows_use_the_shared_classifier() -> None:
    rows = [
        (
            "kernel",
            UNCLASSIFIED,
            "ncclDevKernel_AllReduce_f32_RING(ncclDevKernelArgsStorage<4096ul>)",
        ),
        ("kernel", UNCLASSIFIED, "void at::native::vectorized_elementwise_kernel<4>(int)"),
        ("memcpy", UNCLASSIFIED, "Memcpy HtoD (Pinned -> Device)"),
        ("memset", UNCLASSIFIED, "Memset (Device)"),
        ("gpu_sync", UNCLASSIFIED, "Stream Sync"),
        ("kernel", CATEGORIES.index("host"), "ncclDevKernel_SendRecv"),  # recorded as host: kept
        ("region", CATEGORIES.index("compute"), "forward"),
    ]
    n = len(rows)
    cols = {
        "start_ns": np.arange(n, dtype=np.int64),
        "end_ns": np.arange(n, dtype=np.int64) + 5,
        "correlation": np.zeros(n, np.int64),
        "bytes": np.zeros(n, np.int64),
        "name_id": np.array([_core.intern(r[2]) for r in rows], np.uint32),
        "detail_id": np.zeros(n, np.uint32),
        "lane": np.zeros(n, np.int32),
        "device": np.zeros(n, np.int16),
        "kind": np.array([KIND_ID[r[0]] for r in rows], np.uint8),
        "category": np.array([r[1] for r in rows], np.uint8),
    }
    got = chunk_to_table(cols, 0, 1, StringCache()).column("category").to_pylist()
    assert got == ["comm", "compute", "memcpy", "memcpy", "sync", "host", "compute"]
    assert got[:5] == [gpu_category_of(r[2]) for r in rows[:5]]
