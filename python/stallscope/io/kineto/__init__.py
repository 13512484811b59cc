"""Importing PyTorch profiler (Kineto) traces into stallscope's event schema.

``stallscope.import_kineto(path)`` takes one trace file, several, or a folder of them (``.json`` /
``.json.gz``, one file per rank) and returns the events of every rank as one Polars frame in the
schema of _schema.py, so every analysis works on it as on a native capture.
``stallscope.read_kineto(path)`` returns the same events plus per-rank metadata (distributedInfo,
deviceProperties, versions, the problems found).

Two readers, one result. The native scanner (csrc/kineto/stream_scanner.h, driven by _native_read
and converted by _native) reads every trace PyTorch's profiler writes. The general reader (_parse,
_fastjson, _convert: typed msgspec decoding, then Polars) reads a file only where the scanner
declines it, and gives value-for-value the same frame wherever both read (tests/unit/kineto/
test_native_scan.py holds them equal). The scanner declines, and the general reader takes:

* JSON it cannot vouch for: malformed or truncated text, bad escapes, lone surrogates, invalid
  UTF-8, control characters in strings, malformed numbers (even in values the importer skips),
  nesting deeper than 512 levels, anything after the top-level object. The general reader then
  raises the TraceImportError that names the fault.
* Values of another shape than the profiler writes where the importer reads a field: an event
  or its args that is not an object; a list, object or float where an integer belongs (pid,
  tid, correlation ...), a numeric string there, a non-string where a string belongs; a time
  (ts, dur) that is not a number, an integer time beyond int64, a float time out of range;
  traceEvents that is not a list, or given twice; a key given twice in one event or its args.
  The general reader applies the importer's rules to these (keep, convert or drop and count).
* Metadata (the top-level members other than traceEvents) that orjson cannot decode, e.g. an
  integer beyond 64 bits.
* Every file, when STALLSCOPE_KINETO_READER=general (for comparisons and bisecting).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import polars as pl

from stallscope._schema import COLUMNS, TRACE_MARK, conform, format_detail
from stallscope._utils.gil import fair_gil
from stallscope.exceptions import StallscopeWarning, TraceImportError
from stallscope.io.kineto import _native, _native_read
from stallscope.io.kineto._collectives import collective_events
from stallscope.io.kineto._convert import convert
from stallscope.io.kineto._parse import parse_owned, read_bytes

__all__ = ["TRACE_MARK", "KinetoImport", "RankMeta", "import_kineto", "read_kineto"]

# HTA's rank rule when distributedInfo lacks it: the first '"rank": N' (whitespace required).
_HTA_RANK_RE = re.compile(rb'"rank":[ \t]+(\d+)')
_SUFFIXES = (".json", ".json.gz", ".gz")
_MAX_BASE_NS = 4 * 10**18  # year 2096; keeps base + ts within int64

PathArg = str | os.PathLike[str]


@dataclass
class RankMeta:
    """What one trace file said about its rank."""

    rank: int
    path: Path
    world_size: int | None
    distributed_info: dict[str, Any]
    device_properties: list[dict[str, Any]]
    metadata: dict[str, Any]  # other top-level keys: schemaVersion, versions, traceName, ...
    base_ns: int  # baseTimeNanoseconds (0 when the trace has absolute timestamps)
    ts_float: bool  # timestamps written as floats (ns resolution): HTA rounds them
    events: int  # events imported
    problems: dict[str, int] = field(default_factory=dict)  # reason -> rows dropped or kept


@dataclass
class KinetoImport:
    """Events of every rank (event schema) and per-rank metadata."""

    events: pl.DataFrame
    ranks: dict[int, RankMeta]

    @property
    def world_size(self) -> int | None:
        sizes = {m.world_size for m in self.ranks.values() if m.world_size is not None}
        return max(sizes) if sizes else None


def _files(paths: PathArg | Iterable[PathArg]) -> list[Path]:
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise TraceImportError("no trace given: pass a Kineto trace file, several, or a folder")
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and q.name.endswith(_SUFFIXES))
            if not found:
                raise TraceImportError(
                    f"{p}: no .json or .json.gz trace files in this folder; pass the folder "
                    "that torch.profiler's tensorboard_trace_handler wrote, or the files"
                )
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise TraceImportError(f"{p}: no such file or folder")
    return out


def _as_int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def _reader() -> str:
    """STALLSCOPE_KINETO_READER: "auto" (default: native scanner, general reader as fallback),
    "native" (the same; kept for symmetry) or "general" (never the native scanner)."""
    return os.environ.get("STALLSCOPE_KINETO_READER", "auto")


@dataclass
class _Facts:
    """What a file's metadata says, before its events are converted."""

    rank: int
    base_ns: int
    world: int | None
    dist: dict[str, Any]
    meta: dict[str, Any]
    problems: dict[str, int]


def _facts(path: Path, meta: dict[str, Any], text_rank: int | None) -> _Facts:
    dist = meta.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    rank = _as_int(dist.get("rank"))
    if rank is None:
        rank = text_rank if text_rank is not None else 0
    if not 0 <= rank < 2**31:
        raise TraceImportError(f"{path}: rank {rank} out of range")
    problems: dict[str, int] = {}
    base_ns = _as_int(meta.get("baseTimeNanoseconds")) or 0
    if not 0 <= base_ns < _MAX_BASE_NS:
        problems[f"baseTimeNanoseconds {base_ns} out of range (ignored: times stay relative)"] = 1
        base_ns = 0
    return _Facts(rank, base_ns, _as_int(dist.get("world_size")), dist, meta, problems)


def _rank_meta(path: Path, f: _Facts, ts_float: bool, events: int) -> RankMeta:
    devices = f.meta.get("deviceProperties")
    return RankMeta(
        rank=f.rank,
        path=path,
        world_size=f.world,
        distributed_info=f.dist,
        device_properties=devices if isinstance(devices, list) else [],
        metadata={
            k: v for k, v in f.meta.items() if k not in ("distributedInfo", "deviceProperties")
        },
        base_ns=f.base_ns,
        ts_float=ts_float,
        events=events,
        problems=f.problems,
    )


# ";" and "=" separate a detail's pairs: a file name keeps neither (str.translate: no regex to
# compile in an import, ~0.3 ms the first time in a process).
_DETAIL_SAFE: Final = str.maketrans(";=", "__")


def _mark_detail(path: Path, f: _Facts, ts_float: bool, row0: int | None) -> str:
    """The detail of a file's trace mark (what the HTA views need to rebuild HTA's times)."""
    return format_detail(
        {
            "source": "kineto",
            "base_ns": f.base_ns,
            "ts_float": int(ts_float),
            "world_size": f.world if f.world is not None else "",
            "row0_ns": "" if row0 is None else row0,
            "file": path.name.translate(_DETAIL_SAFE),
        }
    )


def _marks(rows: list[tuple[Path, _Facts, bool, int | None, int]]) -> pl.DataFrame:
    """One trace mark per file: (path, facts, ts_float, row0_ns, start of its first event)."""
    marks = [
        {
            "rank": f.rank,
            "pid": 0,
            "kind": "mark",
            "category": "host",
            "name": TRACE_MARK,
            "start_ns": start,
            "end_ns": start,
            "lane": 0,
            "device": -1,
            "correlation": 0,
            "bytes": 0,
            "value": None,
            "detail": _mark_detail(path, f, ts_float, row0),
        }
        for path, f, ts_float, row0, start in rows
    ]
    return conform(pl.DataFrame(marks)).collect()


def _read_general(path: Path) -> tuple[pl.DataFrame, RankMeta]:
    """One file through the general reader (_parse + _convert)."""
    raw = read_bytes(path)
    m = _HTA_RANK_RE.search(raw)  # HTA's rule, used when distributedInfo has no rank
    holder = [raw]
    del raw  # the parser drops the text as soon as it is decoded
    frame, meta = parse_owned(holder, path)
    f = _facts(path, meta, int(m.group(1)) if m else None)
    events, ts_float = convert(frame, rank=f.rank, base_ns=f.base_ns, problems=f.problems)
    del frame
    colls = collective_events(events)
    events = pl.concat([events, colls]) if colls.height else events
    events = events.sort("start_ns", "_i", "kind", maintain_order=True)
    # The file's first event, when kept: HTA looks a partnerless GPU op's launch up at row 0.
    row0 = events.filter(pl.col("_i") == 0)["start_ns"]
    row0_ns = int(row0[0]) if row0.len() else None
    events = events.select(COLUMNS)
    start = int(events["start_ns"].min()) if events.height else f.base_ns  # type: ignore[arg-type]
    mark = _marks([(path, f, ts_float, row0_ns, start)])
    out = pl.concat([mark, conform(events).collect()])
    return out, _rank_meta(path, f, ts_float, events.height)


def _read_native(
    paths: list[Path],
) -> tuple[pl.DataFrame | None, dict[Path, RankMeta], list[tuple[Path, pl.DataFrame, RankMeta]]]:
    """Files through the native scanner: (their events, sorted by rank and time; their
    RankMeta by path) plus the files it declined, read by the general reader."""
    session = _native_read.Session()
    scans: list[_native_read.FileScan] = []
    facts: list[_Facts] = []
    general: list[tuple[Path, pl.DataFrame, RankMeta]] = []
    for path, fs in session.read_all(paths):
        if fs is None:
            general.append((path, *_read_general(path)))
            continue
        scans.append(fs)
        facts.append(_facts(path, fs.meta, fs.res["rank"]))
    session.scanner.release_buffers()  # before the conversion, which holds the most memory
    if not scans:
        return None, {}, general

    def mark_detail(i: int, ts_float: bool, row0: int | None) -> str:
        return _mark_detail(scans[i].path, facts[i], ts_float, row0)

    conv = _native.convert_all(
        scans, session, [f.rank for f in facts], [f.base_ns for f in facts], mark_detail
    )
    infos: dict[Path, RankMeta] = {}
    for i, (fs, f) in enumerate(zip(scans, facts, strict=True)):
        f.problems.update(conv.problems[i])
        infos[fs.path] = _rank_meta(fs.path, f, conv.ts_float[i], conv.counts[i])
    return conv.frame, infos, general


@fair_gil
def read_kineto(paths: PathArg | Iterable[PathArg]) -> KinetoImport:
    """Import Kineto traces (a file, several, or a folder; one file per rank) with per-rank
    metadata. TraceImportError for unusable input (malformed JSON, truncated gzip, no
    traceEvents, two files of one rank, files of different jobs); rows that cannot be used are
    dropped and counted in one StallscopeWarning per file."""
    files = _files(paths)
    frames: list[pl.DataFrame] = []
    by_path: dict[Path, RankMeta] = {}
    if _reader() != "general" and _native_read.available():
        native, by_path, general = _read_native(files)
        # Everything the scan kept (flows, NCCL metadata, columns replaced by sorted copies) is
        # freed once _read_native returns: give those pages back too (large imports only).
        _native.trim_heap(0 if native is None else native.height)
        if native is not None:
            frames.append(native)
    else:
        general = [(p, *_read_general(p)) for p in files]
    for path, frame, info in general:
        frames.append(frame)
        by_path[path] = info
    ranks: dict[int, RankMeta] = {}
    for path in files:
        info = by_path[path]
        if info.rank in ranks:
            raise TraceImportError(
                f"{path} and {ranks[info.rank].path} are both rank {info.rank}: import one "
                "job's traces at a time, one file per rank (move the other file away)"
            )
        ranks[info.rank] = info
        if info.problems:
            listed = "; ".join(f"{n} {why}" for why, n in info.problems.items())
            warnings.warn(f"{path}: {listed}", StallscopeWarning, stacklevel=3)
    sizes = {m.world_size for m in ranks.values() if m.world_size is not None}
    if len(sizes) > 1:
        listing = ", ".join(f"{m.path.name}: {m.world_size}" for m in ranks.values())
        raise TraceImportError(
            f"these traces come from different jobs (world sizes differ: {listing}); import "
            "each job's folder separately"
        )
    if sizes:
        world = sizes.pop()
        beyond = sorted(r for r in ranks if r >= world)
        if beyond:
            raise TraceImportError(
                f"rank(s) {beyond} are outside world_size {world}: these files do not come "
                "from one job"
            )
    events = pl.concat(frames) if len(frames) != 1 else frames[0]
    if len(frames) != 1:
        events = events.sort("rank", "start_ns", maintain_order=True)
    return KinetoImport(events=events, ranks=dict(sorted(ranks.items())))


@fair_gil
def import_kineto(paths: PathArg | Iterable[PathArg]) -> pl.DataFrame:
    """Events of Kineto (PyTorch profiler) traces in stallscope's event schema: one file,
    several files or a folder (.json / .json.gz, one file per rank). See `read_kineto` for
    per-rank metadata."""
    return read_kineto(paths).events
