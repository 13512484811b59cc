"""The native reader of Kineto JSON: the files read by `_native_read.Session` (one scanner per
import, string dictionaries shared by its files) are converted to the event schema once for
all files: per-string work (kind, category and step of each distinct category and name) on the
dictionaries here, per-row work and the sort in one C++ pass (`_core.kineto_convert`,
csrc/kineto/row_convert.h), strings gathered by code, NCCL collectives inserted where the sort
puts them. Results are those of the general reader (_parse + _convert), value for value.
Numbers follow the general reader's typed decoder (msgspec, a dependency).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope._schema import (
    CATEGORIES,
    CATEGORY,
    CATEGORY_ID,
    GPU_KINDS,
    KIND,
    KIND_ID,
    KINDS,
    TRACE_MARK,
    kind_mask,
)
from stallscope._utils import arrow as _arrow
from stallscope._utils.cpus import usable_cpus
from stallscope.io.kineto._collectives import OP_NAME, Links, Ops, collective_rows
from stallscope.io.kineto._convert import (
    FLOW_CATS,
    KIND_OF_CAT,
    NULL,
    PROBLEMS,
    clean_str,
    unknown_categories,
)
from stallscope.io.kineto._name_facts import name_facts
from stallscope.io.kineto._native_read import FileScan, Session

# The scanner's columns take about 90 bytes per event. Freed heap up to KEEP_FREED is left to
# glibc: the analysis that follows an import allocates about as much again and reuses it without
# a page fault per 4 KiB (3-4 µs each on this project's VM; the V100 trace's import plus views
# took 17 k of them). Beyond it, the pages go back to the OS.
SCAN_BYTES_PER_EVENT: Final = 90
KEEP_FREED: Final = 64 << 20


def trim_heap(events: int) -> None:
    """Give the C heap's free pages back to the OS once the scan columns of `events` events are
    freed, when they held more than KEEP_FREED (glibc keeps freed blocks below its mmap
    threshold in its heap)."""
    if events * SCAN_BYTES_PER_EVENT <= KEEP_FREED:
        return
    from stallscope import _core

    _core.trim_heap()


@dataclass
class _Tables:
    """Per-code facts of the shared dictionaries (computed once per import)."""

    cat_kind: np.ndarray[Any, Any]  # cat code -> KIND index
    cat_known: np.ndarray[Any, Any]  # a category the importer knows ("Trace" included)
    cat_trace: np.ndarray[Any, Any]  # cat "Trace": dropped (by kineto_convert), as HTA does
    cat_flow: np.ndarray[Any, Any]
    cat_linked: np.ndarray[Any, Any]  # GPU / runtime categories (linked by correlation)
    cat_stripped: list[str]
    cat_detail: list[str]  # "cat=<cat>" per code
    name_step: np.ndarray[Any, Any]  # name code -> ProfilerStep number (NULL: none)
    name_gpu_cat: np.ndarray[Any, Any]  # name code -> CATEGORY index for GPU rows
    names: list[str]  # name code -> name ("" appended: the code of rows without a name)
    args: list[str]  # args dictionary
    args_clean: list[str]  # the same, safe inside detail (_convert.clean_str)


# Unicode White_Space: what Polars' str.strip_chars() strips (the general reader's rule).
# Python's str.strip() would also strip U+001C-U+001F.
_WHITE_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)


def _tables(scanner: Any) -> _Tables:
    stripped = [c.strip(_WHITE_SPACE) for c in scanner.strings("cat")]
    kinds = [KIND_OF_CAT.get(c, "region") for c in stripped]
    linked = {c for c, k in KIND_OF_CAT.items() if k in (*GPU_KINDS, "runtime")}
    names = [*scanner.strings("name"), ""]
    name_step, name_gpu_cat = name_facts(names)
    args = scanner.strings("args")
    return _Tables(
        cat_kind=np.array([KIND_ID[k] for k in kinds], dtype=np.uint8),
        cat_known=np.array([c in KIND_OF_CAT or c == "Trace" for c in stripped], dtype=bool),
        cat_trace=np.array([c == "Trace" for c in stripped], dtype=bool),
        cat_flow=np.array([c in FLOW_CATS for c in stripped], dtype=bool),
        cat_linked=np.array([c in linked for c in stripped], dtype=bool),
        cat_stripped=stripped,
        cat_detail=["cat=" + clean_str(c) for c in stripped],
        name_step=name_step,
        name_gpu_cat=name_gpu_cat,
        names=names,
        args=args,
        args_clean=[clean_str(a) for a in args],
    )


def _link_flows(
    rows: dict[str, np.ndarray[Any, Any]],
    fs: FileScan,
    t: _Tables,
    no_corr: np.ndarray[Any, Any],
) -> None:
    """args.correlation from ac2g flows (s at the runtime call, f at the GPU op; id =
    correlation) for rows of traces whose events lack it; in place. Takes the flows out of
    `fs`. no_corr: the file's rows without a correlation per cat code (kineto_cat_counts):
    most traces have none in a linked category, and then no row is looked at here."""
    # The flows are read here only: freed with this call, before the conversion allocates.
    fl = fs.res.pop("flows")
    if not no_corr[t.cat_linked].any():
        return
    corr = rows["correlation"]
    unlinked = (corr == NULL) & t.cat_linked[rows["cat"]]
    keep = t.cat_flow[fl["cat"]] if len(fl["cat"]) else np.zeros(0, dtype=bool)
    cols = {k: fl[k][keep] for k in ("pid", "tid", "ts_ns", "id")}
    flows = (
        _arrow.frame(cols)
        .filter(*(pl.col(k) != NULL for k in cols))
        .unique(subset=["pid", "tid", "ts_ns"], keep="first", maintain_order=True)
    )
    pos = np.flatnonzero(unlinked)
    want = _arrow.frame({"pos": pos, **{k: rows[k][pos] for k in ("pid", "tid", "ts_ns")}}).filter(
        pl.col("pid") != NULL, pl.col("tid") != NULL
    )
    found = want.join(flows, on=["pid", "tid", "ts_ns"], how="inner")
    corr[found["pos"].to_numpy()] = found["id"].to_numpy()


@dataclass
class Converted:
    """The events of every natively read file in schema columns, sorted (rank, start), a trace
    mark per file first in its rank, and per file what the caller reports."""

    frame: pl.DataFrame
    problems: list[dict[str, int]]
    counts: list[int]  # events per file (collectives included, the trace mark not)
    ts_float: list[bool]  # the file's kept ts were read as floats


# (file number, its ts_float, start of its rank's event 0 when kept) -> its trace mark's detail
MarkDetail = Callable[[int, bool, int | None], str]


def convert_all(
    scans: list[FileScan],
    session: Session,
    ranks: list[int],
    bases: list[int],
    mark_detail: MarkDetail,
) -> Converted:
    """Schema rows for the files read by `session` (rank and baseTimeNanoseconds per file), a
    trace mark per file first in its rank (its detail from `mark_detail`), sorted."""
    from stallscope import _core

    t = _tables(session.scanner)
    per_file: list[dict[str, np.ndarray[Any, Any]]] = []  # each file's scanner columns
    problems: list[dict[str, int]] = []
    sizes: list[int] = []  # rows per file, as scanned (kineto_convert drops cat "Trace")
    for fs in scans:
        rows = dict(fs.res.pop("rows"))  # the scanner's columns: freed once converted
        probs = _problems(fs.res["problems"])
        # Rows per category code, and those without a correlation (one C++ pass): the unknown
        # categories are counted as a problem; flows are linked only where one lacks it.
        per_cat, no_corr = _core.kineto_cat_counts(
            rows["cat"], rows["correlation"], len(t.cat_known)
        )
        _link_flows(rows, fs, t, no_corr)
        unknown = np.flatnonzero((per_cat > 0) & ~t.cat_known)
        if unknown.size:
            key = unknown_categories(list({t.cat_stripped[c] for c in unknown.tolist()}))
            probs[key] = probs.get(key, 0) + int(per_cat[unknown].sum())
        problems.append(probs)
        sizes.append(len(rows["index"]))
        per_file.append(rows)
    del rows  # the loop's last file: its columns must not outlive `per_file` below
    # Placing NCCL collectives needs kineto_convert's links (index, kind_order, out_row): most
    # imports have none to place.
    links = any(len(fs.res["nccl"]["index"]) for fs in scans)
    # Each file's columns as the scanner left them (no copy into one set of columns); with
    # several files, up to a thread per core converts whole files.
    out = _core.kineto_convert(
        per_file,
        t.cat_kind,
        t.cat_trace.view(np.uint8),
        t.name_step,
        t.name_gpu_cat,
        _KIND_GPU,
        _KIND_ORDER,
        ranks,
        bases,
        sizes,
        mark_cat0=len(t.cat_detail),
        mark_name=len(t.names),
        threads=min(_cores(), CONVERT_THREADS_MAX),
        links=links,
        null_name=len(t.names) - 1,  # "" (names' last entry) for rows without a name
    )
    kept = out.pop("file_kept").tolist()  # rows per file that kineto_convert kept
    ts_float = [bool(fs.res["ts_float"]) and n > 0 for fs, n in zip(scans, kept, strict=True)]
    # Each file's event indices in file order (for NCCL rows); the other columns are freed.
    file_index = [rows.pop("index") for rows in per_file]
    del per_file
    # The scan columns are free now. Give large ones back before Polars (another allocator)
    # allocates: glibc would keep them, and the process would hold both.
    trim_heap(sum(sizes))
    # HTA's row 0 per rank: the earliest kept event 0 of its files.
    row0_by_rank: dict[int, int] = {}
    for r, v in zip(ranks, out.pop("file_row0").tolist(), strict=True):
        if v != NULL:
            row0_by_rank[r] = min(v, row0_by_rank.get(r, v))
    marks = [mark_detail(i, ts_float[i], row0_by_rank.get(r)) for i, r in enumerate(ranks)]
    names = [*t.names, TRACE_MARK]
    details = [*t.cat_detail, *marks]
    per_rank = _add_collectives(out, scans, t, sizes, file_index, names, details) if links else {}
    del file_index
    counts = [c + per_rank.get(r, 0) for c, r in zip(kept, ranks, strict=True)]
    frame = _schema_frame(out, t, names, details)
    return Converted(frame=frame, problems=problems, counts=counts, ts_float=ts_float)


def _schema_frame(
    out: dict[str, np.ndarray[Any, Any]], t: _Tables, names: list[str], details: list[str]
) -> pl.DataFrame:
    """The schema columns from kineto_convert's sorted columns (collectives merged in): name
    codes index `names`, cat codes `details` (the "cat=<cat>" of each category, then each trace
    mark's and each collective's whole detail). From DETAIL_THREAD_MIN rows on, the detail
    column is written by C++ threads (more on machines of more cores, for large imports) while
    this one makes the rest (its buffers sized here: see `_core.DetailJob`)."""
    from stallscope import _core

    job = _core.kineto_detail(out["cat"], details, out["ext"], out["sync_kind"], t.args_clean)
    rows = len(out["rank"])
    if rows >= DETAIL_THREAD_MIN:
        # A thread per DETAIL_ROWS_PER_THREAD rows, one core left for this thread's columns.
        job.start(max(1, min(_cores() - 1, rows // DETAIL_ROWS_PER_THREAD, DETAIL_THREADS_MAX)))
    try:
        columns = _columns(out, names)
    finally:
        text = job.result()  # waits for the thread (and joins it on an error above, too)
    frame = _arrow.frame_of([*columns, _arrow.column(text)])
    # The name column's codes, for the HTA views: string_codes would hash every row for them.
    _arrow.remember_codes(frame, "name", names, out["name"])
    return frame


def _columns(out: dict[str, np.ndarray[Any, Any]], names: list[str]) -> list[pl.Series]:
    """Every schema column but detail."""
    return [
        _arrow.series(out["rank"], "rank"),
        _arrow.series(out["pid"], "pid"),
        _arrow.enum(out["kind"], KINDS, KIND, "kind"),
        _arrow.enum(out["category"], CATEGORIES, CATEGORY, "category"),
        _arrow.strings(names, out["name"], "name"),
        *(_arrow.series(out[k], k) for k in ("start_ns", "end_ns", "lane", "device")),
        *(_arrow.series(out[k], k) for k in ("correlation", "bytes")),
        # all null (pl.repeat: 1-7 ms in a fresh process)
        _NULL_VALUE.new_from_index(0, len(out["rank"])),
    ]


# CPUs this process may use (see stallscope._utils.cpus); a name of this module's own, so that tests
# can set the machine's size.
_cores = usable_cpus

# Threads the conversion may use at most (a thread converts whole files; the import's other
# steps are single-threaded, so more would add little).
CONVERT_THREADS_MAX: Final = 16

# Rows from which the detail column is written by a thread of its own (about 1 ms of work per
# 25 k rows; a C++ thread costs tens of µs to start and join). Fresh processes, medians of 5:
# the A100 NCCL trace (27 k rows) and DLRM's (20 k) 0.3 ms faster with it, the 10 k-event
# traces (9.5 k) 0.3 ms slower.
DETAIL_THREAD_MIN: Final = 15_000
# More threads for the detail column on machines of more cores (a folder of 8 V100 ranks: 987 k
# rows, 15-25 ms of writing on one thread).
DETAIL_ROWS_PER_THREAD: Final = 65_536
DETAIL_THREADS_MAX: Final = 8
_NULL_VALUE: Final = pl.Series("value", [None], dtype=pl.Float64)


# Kind codes ordered as their names sort (the general converter sorts ties by the kind's name).
_KIND_ORDER: Final = np.argsort(np.argsort(np.array(KINDS))).astype(np.uint8)
# Kind -> 1 for the GPU activity kinds (their lane is the stream, their category the name's).
_KIND_GPU: Final = kind_mask(GPU_KINDS).astype(np.uint8)


def _problems(counts: dict[str, int]) -> dict[str, int]:
    return {PROBLEMS[k]: int(v) for k, v in counts.items() if v}


def _add_collectives(
    out: dict[str, np.ndarray[Any, Any]],
    scans: list[FileScan],
    t: _Tables,
    sizes: list[int],
    file_index: list[np.ndarray[Any, Any]],
    names: list[str],
    details: list[str],
) -> dict[int, int]:
    """Collective rows from the record_param_comms rows' NCCL metadata, inserted into
    kineto_convert's sorted columns `out` where the sort (rank, start, event index, kind order)
    puts them; their names and details are appended to `names` / `details`. The rule
    (`collective_rows`) reads the rows it needs (the operations, the NCCL kernels, the runtime
    calls) as arrays, and every column grows by one shared insertion plan: no frame of every
    row, no second sort. Returns the rows added per rank. file_index: per file, its scanned
    rows' event indices (increasing); `sizes`: the scanned rows per file."""
    out_row = out.pop("out_row")
    pos_parts: list[np.ndarray[Any, Any]] = []
    meta: dict[str, list[np.ndarray[Any, Any]]] = {}
    offset = 0
    for fs, size, idx in zip(scans, sizes, file_index, strict=True):
        nc = fs.res["nccl"]
        if len(nc["index"]) and size:  # NCCL rows of dropped events have no row to join
            at = np.searchsorted(idx, nc["index"])
            ok = (at < size) & (idx[np.minimum(at, size - 1)] == nc["index"])
            ok[ok] = out_row[at[ok] + offset] >= 0  # not a dropped row
            pos_parts.append(out_row[at[ok] + offset])
            for k, v in nc.items():
                meta.setdefault(k, []).append(v[ok])
        offset += size
    if not pos_parts:
        return {}
    pos = np.concatenate(pos_parts)
    m = {k: np.concatenate(v) for k, v in meta.items()}
    kind, category, corr = out["kind"], out["category"], out["correlation"]
    kernels = np.flatnonzero((kind == KIND_ID["kernel"]) & (category == CATEGORY_ID["comm"]))
    runtime = np.flatnonzero(kind == KIND_ID["runtime"])
    runtime = runtime[np.isin(corr[runtime], corr[kernels])]  # a superset of the launches
    ops = Ops(
        **{c: out[c][pos].astype(np.int64) for c in ("rank", "pid", "lane")},
        start=out["start_ns"][pos],
        end=out["end_ns"][pos],
        is_op=np.array([n == OP_NAME for n in t.names])[out["name"][pos]],
        **{c: m[c].astype(np.int64) for c in ("coll", "dtype", "pg", "pg_desc", "pg_ranks")},
        group_size=m["group_size"],
        in_nelems=m["in_nelems"],
        strings=t.args,
    )
    links = Links(
        k_rank=out["rank"][kernels].astype(np.int64),
        k_corr=corr[kernels],
        k_start=out["start_ns"][kernels],
        k_end=out["end_ns"][kernels],
        r_rank=out["rank"][runtime].astype(np.int64),
        r_pid=out["pid"][runtime].astype(np.int64),
        r_lane=out["lane"][runtime].astype(np.int64),
        r_start=out["start_ns"][runtime],
        r_corr=corr[runtime],
    )
    c = collective_rows(ops, links)
    k = len(c.op)
    if k == 0:
        return {}
    rows = pos[c.op]
    rank, index = out["rank"][rows], out["index"][rows]
    kord = _KIND_ORDER[c.kind]
    order = np.lexsort((kord, index, c.start, rank))  # stable, as the events' sort
    add = {
        "rank": rank,
        "pid": out["pid"][rows],
        "start_ns": c.start,
        "end_ns": c.end,
        "lane": out["lane"][rows],
        "device": out["device"][rows],
        "correlation": c.correlation,
        "bytes": c.bytes,
        "kind": c.kind,
        "category": np.full(k, CATEGORY_ID["comm"]),
        "name": len(names) + c.name,
        "cat": len(details) + c.detail,
        "ext": np.full(k, NULL),
        "sync_kind": np.full(k, -1),
        "index": index,
        "kind_order": kord,
    }
    add = {key: v[order] for key, v in add.items()}
    # Every column grows by the same insertion: its plan made once (np.insert per column
    # sorted the points and built the mask each time, twice as long on the A100 NCCL trace).
    at = _insertion_points(out, add)  # non-decreasing: `add` is in the rows' order
    new_pos = at + np.arange(k)
    old_rows = np.ones(len(out["rank"]) + k, dtype=bool)
    old_rows[new_pos] = False
    for col, v in add.items():
        grown = np.empty(old_rows.size, dtype=out[col].dtype)
        grown[old_rows] = out[col]
        grown[new_pos] = v
        out[col] = grown
    names.extend(c.names)
    details.extend(c.details)
    per_rank: dict[int, int] = {}
    for r in rank.tolist():  # one entry per collective: a few thousand at most
        per_rank[r] = per_rank.get(r, 0) + 1
    return per_rank


def _insertion_points(
    out: dict[str, np.ndarray[Any, Any]], add: dict[str, np.ndarray[Any, Any]]
) -> np.ndarray[Any, Any]:
    """Where each row of `add` (sorted by rank, start_ns, index, kind_order) goes into the sorted
    columns `out`: after every row whose key (rank, start, event index, kind order) is not
    greater, where a stable sort of both would put it. Binary searches: by start within each
    rank, then key by key for the few that tie with a row on start."""
    rank, start = out["rank"], out["start_ns"]
    c_rank, c_start = add["rank"], add["start_ns"]
    lo = np.empty(len(c_rank), dtype=np.int64)
    hi = np.empty(len(c_rank), dtype=np.int64)
    for r in sorted(set(c_rank.tolist())):
        sel = c_rank == r
        a, b = np.searchsorted(rank, r, "left"), np.searchsorted(rank, r, "right")
        lo[sel] = a + np.searchsorted(start[a:b], c_start[sel], "left")
        hi[sel] = a + np.searchsorted(start[a:b], c_start[sel], "right")
    keys = (out["index"], out["kind_order"])
    want = (add["index"], add["kind_order"])
    for j in np.flatnonzero(hi > lo).tolist():  # ties on start: rare
        a, b = int(lo[j]), int(hi[j])
        for key, w in zip(keys, want, strict=True):
            part = key[a:b]
            a, b = (
                a + int(np.searchsorted(part, w[j], "left")),
                a + int(np.searchsorted(part, w[j], "right")),
            )
            if a == b:
                break
        hi[j] = b
    return hi
