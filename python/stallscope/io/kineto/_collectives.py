"""Collective events from Kineto's NCCL metadata (``record_param_comms`` with ``Collective
name``), following the contract of analysis/_collectives.py where the metadata allows:

- kind ``p2p`` for send/recv, else ``collective``; category ``comm``; name = Collective name;
- correlation = the operation's sequence number within its process group on this rank (the
  n-th collective a rank issued in a group; equal across ranks that profiled the same window);
- bytes = In msg nelems x the dtype's size;
- detail: group (Process Group Name and its ranks), group_size, pg_desc, dtype. Kineto does not
  say how many nodes a group spans, so ``nnodes`` is absent;
- start/end: the NCCL kernel(s) the operation launched, else the CPU range itself. A kernel
  belongs to the operation whose range holds its launch: the runtime call with the kernel's
  correlation, on the operation's thread (rank, pid, lane), at or after the operation's start
  and not after its end; of nested operations the latest-starting one (equal starts: the later
  row) takes it.

One rule for both readers, on NumPy arrays: the native reader passes its scan's columns and
string codes, the general reader its frames (`collective_events`). A trace has few operations
(tens to thousands), where Polars' per-query costs outweigh the rows; the rule's loops run per
thread and per distinct string, never per row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope._schema import KIND_ID
from stallscope._utils import arrow as _arrow
from stallscope._utils.sorted import lookup, segment_starts
from stallscope.io.kineto._convert import DTYPE_BYTES, NULL, clean_str

P2P_NAMES = ("send", "recv", "isend", "irecv", "_send", "_recv")
NOT_COLLECTIVES = ("wait", "")  # record_param_comms of a work.wait(): no transfer of its own
OP_NAME: Final = "record_param_comms"

_Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Ops:
    """Candidate operations, one entry per row (any ranks): int64 arrays, string fields as
    codes into `strings` (negative: null), integer fields with NULL for null."""

    rank: _Array
    pid: _Array
    lane: _Array
    start: _Array  # ns
    end: _Array  # ns
    is_op: _Array  # bool: the row is a record_param_comms
    coll: _Array
    dtype: _Array
    pg: _Array
    pg_desc: _Array
    pg_ranks: _Array
    group_size: _Array
    in_nelems: _Array
    strings: Sequence[str]


@dataclass(frozen=True)
class Links:
    """The rows that tie an operation to its kernels: NCCL kernels (rank, correlation, start,
    end) and runtime calls (rank, pid, lane, start, correlation). int64 arrays."""

    k_rank: _Array
    k_corr: _Array
    k_start: _Array
    k_end: _Array
    r_rank: _Array
    r_pid: _Array
    r_lane: _Array
    r_start: _Array
    r_corr: _Array


@dataclass(frozen=True)
class Collectives:
    """The rule's rows, sorted by (rank, the operation's start), ties in row order."""

    op: _Array  # the row of `Ops` each comes from
    kind: _Array  # uint8 KIND_ID code: collective or p2p
    start: _Array  # ns: the first kernel's start, else the operation's
    end: _Array  # ns: the last kernel's end, else the operation's
    correlation: _Array  # sequence number within (rank, group)
    bytes: _Array
    name: _Array  # codes into `names`
    detail: _Array  # codes into `details`
    names: list[str]
    details: list[str]


def collective_rows(ops: Ops, links: Links) -> Collectives:
    """The collectives of `ops` (the rows that are record_param_comms with a Collective name
    other than wait), timed by their kernels in `links`."""
    table = list(ops.strings)
    not_coll = np.array([s in NOT_COLLECTIVES for s in table] + [True], dtype=bool)
    coll = np.where(ops.coll < 0, len(table), ops.coll)
    sel = np.flatnonzero(ops.is_op & ~not_coll[coll])
    start, end = ops.start[sel], ops.end[sel]
    rank = ops.rank[sel]
    k_start, k_end = _kernel_spans(rank, ops.pid[sel], ops.lane[sel], start, end, links)
    linked = k_start != NULL
    order = np.lexsort((start, rank))  # stable: ties keep row order
    sel, rank, coll = sel[order], rank[order], coll[sel[order]]
    out_start = np.where(linked, k_start, start)[order]
    out_end = np.where(linked, k_end, end)[order]

    # Per distinct string: the group (name and ranks), the kind, the dtype's size.
    group_of, groups = _groups(ops.pg[sel], ops.pg_ranks[sel], table)
    lower = [s.lower() in P2P_NAMES for s in table] + [False]
    kind = np.where(
        np.array(lower, dtype=bool)[coll], KIND_ID["p2p"], KIND_ID["collective"]
    ).astype(np.uint8)
    size = np.array([DTYPE_BYTES.get(s, 0) for s in table] + [0], dtype=np.int64)
    dtype = ops.dtype[sel]
    nelems = ops.in_nelems[sel]
    nbytes = np.where(nelems == NULL, 0, nelems) * size[np.where(dtype < 0, len(table), dtype)]
    detail_of, details = _details(
        group_of, groups, ops.group_size[sel], ops.pg_desc[sel], dtype, table
    )
    name_of, names = _recode(coll, [*table, ""])
    return Collectives(
        op=sel,
        kind=kind,
        start=out_start,
        end=out_end,
        correlation=_running_count(rank, group_of),
        bytes=np.maximum(nbytes, 0),
        name=name_of,
        detail=detail_of,
        names=names,
        details=details,
    )


def _kernel_spans(
    rank: _Array,
    pid: _Array,
    lane: _Array,
    start: _Array,
    end: _Array,
    links: Links,
) -> tuple[_Array, _Array]:
    """Per operation: (first kernel start, last kernel end), NULL where it launched none.
    Equal starts on one thread: the later row takes the launch."""
    n = len(rank)
    k_start = np.full(n, NULL, dtype=np.int64)
    k_end = np.full(n, NULL, dtype=np.int64)
    if n == 0 or len(links.k_rank) == 0 or len(links.r_rank) == 0:
        return k_start, k_end
    # Launches: every (runtime call, kernel) pair with the same rank and correlation.
    nk, nr = len(links.k_rank), len(links.r_rank)
    order, found, first, last = lookup(
        np.concatenate([links.k_rank, links.r_rank]),
        np.concatenate([links.k_corr, links.r_corr]),
        np.arange(nk),
        nk + np.arange(nr),
    )
    lo, hi = np.where(found, first, 0), np.where(found, last + 1, 0)
    call = np.repeat(np.arange(nr), hi - lo)
    if len(call) == 0:
        return k_start, k_end
    kernel = order[_ranges(lo, hi)]  # the kernels are the first nk rows: order indexes them
    l_rank, l_pid, l_lane = links.r_rank[call], links.r_pid[call], links.r_lane[call]
    l_start = links.r_start[call]
    # Each launch's operation: on its thread, the latest start at or before the launch.
    by_op = np.lexsort((np.arange(n), start, lane, pid, rank))
    thread = _heads(rank[by_op], pid[by_op], lane[by_op])
    bounds = [*thread.tolist(), n]
    op_of = np.full(len(call), -1, dtype=np.int64)
    for a, b in pairwise(bounds):
        h = by_op[a]  # the thread's first operation
        mine = np.flatnonzero((l_rank == rank[h]) & (l_pid == pid[h]) & (l_lane == lane[h]))
        j = np.searchsorted(start[by_op[a:b]], l_start[mine], "right") - 1
        ok = j >= 0
        op_of[mine[ok]] = by_op[a:b][j[ok]]
    hit = op_of >= 0
    hit[hit] = l_start[hit] <= end[op_of[hit]]
    op_hit, kern = op_of[hit], kernel[hit]
    if len(op_hit):
        lo_k = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        hi_k = np.full(n, NULL, dtype=np.int64)
        np.minimum.at(lo_k, op_hit, links.k_start[kern])
        np.maximum.at(hi_k, op_hit, links.k_end[kern])
        got = np.zeros(n, dtype=bool)
        got[op_hit] = True
        k_start[got], k_end[got] = lo_k[got], hi_k[got]
    return k_start, k_end


def _ranges(lo: _Array, hi: _Array) -> _Array:
    """The concatenation of range(lo[i], hi[i]) over i."""
    lens = hi - lo
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(lo - (np.cumsum(lens) - lens), lens)
    return starts + np.arange(total, dtype=np.int64)


_BRACKETS: Final = re.compile(r"[\[\]\s]")


def _groups(pg: _Array, pg_ranks: _Array, table: list[str]) -> tuple[_Array, list[str]]:
    """(group id per row, the groups): "<Process Group Name or default>:<its ranks without
    brackets or spaces>", ; and = replaced by _. Distinct code pairs can give one group."""
    key = (
        (np.where(pg < 0, -1, pg) + 1) * (len(table) + 1) + np.where(pg_ranks < 0, -1, pg_ranks) + 1
    )
    pair_of, pairs = _recode_ints(key)
    groups: list[str] = []
    index: dict[str, int] = {}
    gid = np.empty(len(pairs), dtype=np.int64)
    for i, k in enumerate(pairs.tolist()):
        p, q = divmod(k, len(table) + 1)
        name = table[p - 1] if p else "default"
        ranks = _BRACKETS.sub("", table[q - 1]) if q else ""
        g = clean_str(f"{name}:{ranks}")
        gid[i] = index.setdefault(g, len(groups))
        if gid[i] == len(groups):
            groups.append(g)
    return gid[pair_of], groups


def _details(
    group_of: _Array,
    groups: list[str],
    group_size: _Array,
    pg_desc: _Array,
    dtype: _Array,
    table: list[str],
) -> tuple[_Array, list[str]]:
    """(detail code per row, the details), built once per distinct combination."""
    keys = (
        group_of,
        group_size,
        np.where(pg_desc < 0, -1, pg_desc),
        np.where(dtype < 0, -1, dtype),
    )
    if len(group_of) == 0:
        return np.zeros(0, dtype=np.int64), []
    order = np.lexsort(keys[::-1])
    heads = segment_starts(*(k[order] for k in keys))
    first = np.flatnonzero(heads)
    code = np.empty(len(order), dtype=np.int64)
    code[order] = np.cumsum(heads) - 1
    details = []
    for row in order[first].tolist():
        parts = [f"group={groups[group_of[row]]}"]
        if group_size[row] != NULL:
            parts.append(f";group_size={int(group_size[row])}")
        if pg_desc[row] >= 0:
            parts.append(";pg_desc=" + clean_str(table[pg_desc[row]]))
        if dtype[row] >= 0:
            parts.append(";dtype=" + clean_str(table[dtype[row]]))
        details.append("".join(parts))
    return code, details


def _running_count(rank: _Array, group: _Array) -> _Array:
    """Per row: how many rows before it have the same (rank, group)."""
    n = len(rank)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(n), group, rank))
    first = _heads(rank[order], group[order])
    seg_start = np.zeros(n, dtype=np.int64)
    seg_start[first] = first
    np.maximum.accumulate(seg_start, out=seg_start)
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) - seg_start
    return out


def _recode_ints(a: _Array) -> tuple[_Array, _Array]:
    """(code per element, the distinct values in first-seen order)."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64), a
    order = np.argsort(a, kind="stable")
    heads = segment_starts(a[order])
    first = np.flatnonzero(heads)
    code = np.empty(len(a), dtype=np.int64)
    code[order] = np.cumsum(heads) - 1
    # first-seen order: renumber by each value's first position
    firsts = order[first]
    renum = np.empty(len(first), dtype=np.int64)
    renum[np.argsort(firsts, kind="stable")] = np.arange(len(first))
    return renum[code], a[np.sort(firsts)]


def _recode(codes: _Array, table: list[str]) -> tuple[_Array, list[str]]:
    """Codes into `table` renumbered into a table of the distinct strings used."""
    code, used = _recode_ints(codes)
    return code, [table[c] for c in used.tolist()]


_STRS: Final = ("_coll", "_dtype", "_pg", "_pg_desc", "_pg_ranks")


def collective_events(events: pl.DataFrame) -> pl.DataFrame:
    """Collective rows for the converted events of one file (the general reader): `events`
    carry the private columns of the NCCL metadata (_coll, _group_size, _in_nelems, _dtype,
    _pg, _pg_desc, _pg_ranks); the rows returned have the columns of `events`."""
    cand = events.filter(pl.col("_coll").is_not_null())
    table = pl.concat([cand[c] for c in _STRS]).drop_nulls().unique(maintain_order=True)
    at = _arrow.series(np.arange(table.len(), dtype=np.int64))

    def codes(c: str) -> _Array:
        s = cand[c].replace_strict(table, at, default=-1, return_dtype=pl.Int64)
        return s.fill_null(-1).to_numpy()

    def ints(frame: pl.DataFrame, c: str, null: int = NULL) -> _Array:
        return frame[c].cast(pl.Int64).fill_null(null).to_numpy()

    ops = Ops(
        **{c: ints(cand, f) for c, f in _OP_INTS.items()},
        is_op=(cand["name"] == OP_NAME).fill_null(False).to_numpy(),
        **{c[1:]: codes(c) for c in _STRS},
        strings=table.to_list(),
    )
    kernels = events.filter((pl.col("kind") == "kernel") & (pl.col("category") == "comm"))
    runtime = events.filter(pl.col("kind") == "runtime")
    links = Links(
        **{f"k_{c}": ints(kernels, f) for c, f in _KERNEL_COLS.items()},
        **{f"r_{c}": ints(runtime, f) for c, f in _RUNTIME_COLS.items()},
    )
    c = collective_rows(ops, links)
    kinds = pl.Series(["collective", "p2p"], dtype=pl.String)
    return cand[_arrow.series(c.op)].with_columns(
        kind=kinds.gather(_arrow.series((c.kind == KIND_ID["p2p"]).astype(np.uint32))),
        category=pl.lit("comm", pl.String),
        name=_arrow.strings(c.names, c.name),
        start_ns=_arrow.series(c.start),
        end_ns=_arrow.series(c.end),
        correlation=_arrow.series(c.correlation),
        bytes=_arrow.series(c.bytes),
        detail=_arrow.strings(c.details, c.detail),
    )


# Ops / Links field -> events column
_OP_INTS: Final = {
    "rank": "rank",
    "pid": "pid",
    "lane": "lane",
    "start": "start_ns",
    "end": "end_ns",
    "group_size": "_group_size",
    "in_nelems": "_in_nelems",
}
_KERNEL_COLS: Final = {"rank": "rank", "corr": "correlation", "start": "start_ns", "end": "end_ns"}
_RUNTIME_COLS: Final = {
    "rank": "rank",
    "pid": "pid",
    "lane": "lane",
    "start": "start_ns",
    "corr": "correlation",
}


def _heads(*keys: _Array) -> _Array:
    """Positions where any of the sorted `keys` changes (0 included when not empty)."""
    return np.flatnonzero(segment_starts(*keys))
