"""The one classifier of GPU activity names, shared by native CUPTI capture (applied when its
events are written) and the Kineto importer.

Categories (stallscope's, see _schema.CATEGORIES):
- comm: NCCL / RCCL / HCCL kernels (``ncclDevKernel_*``, ``ncclSymkDevKernel_*``,
  ``ncclKernel_*``, anything ``nccl...Kernel``), never by a fixed name.
- memcpy: copies and memsets (``Memcpy ...``, ``Memset ...``, ``dma...``; CUPTI copy/memset
  records are memcpy by kind).
- sync: ``Stream Sync``, ``Event Sync``, ``Context Sync``, ``Stream Wait Event``.
- compute: every other kernel.

`hta_kernel_type_of` is separate on purpose: it reproduces HolisticTraceAnalysis 0.5.0's own regexes
(docs/hta-compatibility.md section 2), quirks included, for the HTA-identical views.
"""

from __future__ import annotations

import re
from typing import Final

import polars as pl

# ASCII classes only (no \w, \s, \d): Python's re and Polars' regex engine define the Unicode
# ones differently, and names are classified by either (io/kineto/_name_facts.py).
COMM_RE: Final = (
    r"^(?:nccl|rccl|hccl)[0-9A-Za-z_]*Kernel|^ncclDevKernel|^ncclSymkDevKernel|^ncclKernel"
)
MEMORY_RE: Final = r"^(?:Memcpy|Memset|dma|hipMemcpy|hipMemset)"
SYNC_RE: Final = r"^(?:Stream Sync|Event Sync|Context Sync|Stream Wait Event)$|Sync$"

# The collective in an NCCL kernel name: ncclDevKernel_AllReduce_Sum_f32_RING_LL -> AllReduce.


def gpu_category(name: pl.Expr) -> pl.Expr:
    """Category (a string of _schema.CATEGORIES) of a GPU activity name (kernel, memcpy,
    memset, sync rows)."""
    return (
        pl.when(name.str.contains(COMM_RE))
        .then(pl.lit("comm"))
        .when(name.str.contains(MEMORY_RE))
        .then(pl.lit("memcpy"))
        .when(name.str.contains(SYNC_RE))
        .then(pl.lit("sync"))
        .otherwise(pl.lit("compute"))
    )


_COMM: Final = re.compile(COMM_RE)
_MEMORY: Final = re.compile(MEMORY_RE)


def gpu_category_of(name: str) -> str:
    """`gpu_category` for one name (the same rules, for code outside Polars). SYNC_RE as string
    tests: its three "... Sync" names also end in "Sync", so it is that suffix or the fourth
    name exactly. Python's `Sync$` would also match before a final newline, and a search for it
    tries every position of the name (kernel names run to 2 k characters: ~2 µs a name)."""
    if _COMM.search(name):
        return "comm"
    if _MEMORY.search(name):
        return "memcpy"
    if name.endswith("Sync") or name == "Stream Wait Event":
        return "sync"
    return "compute"


def hta_kernel_type_of(name: str) -> str:
    """HTA 0.5.0's kernel type of a GPU row's name: COMMUNICATION, MEMORY, COMPUTATION or
    OTHER, with its exact rules and order (quirks included: a name that merely contains
    "Memcpy" or "Sync" is OTHER)."""
    line = name.partition("\n")[0]
    if line.startswith("nccl") and line.find("Kernel", 4) >= 0:
        return "COMMUNICATION"
    if name.startswith(("Memcpy", "Memset", "dma")):
        return "MEMORY"
    if "Memcpy" in line or "Sync" in line:  # (^Memset was taken as MEMORY above)
        return "OTHER"
    return "COMPUTATION"
