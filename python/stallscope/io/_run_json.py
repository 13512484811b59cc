"""run.json: a run directory's metadata, one entry per traced process stem, and every entry's
content, built here and nowhere else.

An entry is written when a trace starts (``started``: placement, host, pid, clock source,
versions, capture settings) and merged at stop (``stopped``: per-thread drop counts, events
written, backends, steps). The torch.distributed backend adds ``clock`` offsets to rank 0
(``clock_offsets``) and the job's ``topology``; an imported Kineto trace gets one ``imported``
entry. Every rank writes the same file, so updates merge under a file lock and replace the
file atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from stallscope.exceptions import RunDirError

RUN_JSON = "run.json"
FORMAT = "stallscope-run"
FORMAT_VERSION = 1


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    lock = run_dir / ".run.json.lock"
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """run.json's content; {} when absent. RunDirError naming the file when it is corrupt."""
    path = run_dir / RUN_JSON
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RunDirError(
            f"{path}: corrupt run.json ({e}); the per-rank .parquet files are intact: delete "
            "run.json to load them without run metadata (no clock alignment, no drop counts)"
        ) from None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != FORMAT
        or not isinstance(doc.get("processes"), dict)
    ):
        raise RunDirError(
            f"{path}: not a stallscope run.json (expected an object with format={FORMAT!r} and "
            "'processes'); delete it to load the event files without run metadata"
        )
    return doc


def update_process(run_dir: Path, stem: str, entry: dict[str, Any]) -> None:
    """Merge `entry` into run.json's entry for `stem`, atomically, under the directory's lock."""
    with _locked(run_dir):
        try:
            doc = read_run_json(run_dir)
        except RunDirError:
            doc = {}
        if not doc:
            doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "processes": {}}
        doc["processes"].setdefault(stem, {}).update(entry)
        tmp = run_dir / f".{RUN_JSON}.{os.getpid()}.tmp"
        tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        os.replace(tmp, run_dir / RUN_JSON)


# -- entries --------------------------------------------------------------------------------------
def started(
    *,
    placement: Any,
    pid: int,
    ppid: int,
    forked_child: bool,
    flush_interval_s: float,
    ring_capacity: int,
    max_threads: int,
    versions: Mapping[str, Any],
    argv: Sequence[str],
    monotonic_ns: int,
    realtime_ns: int,
    mode: str = "full",
    continuous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The entry of a trace that starts: where the process sits in the job and how it traces
    (`continuous`: the options of a continuous trace)."""
    p = placement
    extra: dict[str, Any] = {"mode": mode}
    if continuous is not None:
        extra["continuous"] = {"options": dict(continuous)}
    return extra | {
        "status": "running",
        "start_clock": {"monotonic_ns": monotonic_ns, "realtime_ns": realtime_ns},
        "rank": p.rank,
        "world_size": p.world_size,
        "local_rank": p.local_rank,
        "local_world_size": p.local_world_size,
        "node_rank": p.node_rank,
        "host": p.host,
        "pid": pid,
        "ppid": ppid,
        "forked_child": forked_child,
        "clock": {"source": "CLOCK_MONOTONIC", "unit": "ns"},
        "flush_interval_s": flush_interval_s,
        "ring_capacity": ring_capacity,
        "max_threads": max_threads,
        "versions": dict(versions),
        "argv": list(argv),
    }


def stopped(
    *,
    threads: Sequence[Mapping[str, Any]],
    no_thread_slot: int,
    nesting_too_deep: int,
    events_written: int,
    backends: Mapping[str, Any],
    file: str | None,
    steps: int,
    step_source: Mapping[str, Any],
    monotonic_ns: int,
    realtime_ns: int,
    continuous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a trace adds when it stops: drop counts per cause, what was written, how the steps
    were found (``step_source``: ``source`` is "stallscope.step" for the program's own markers,
    "none", or what `stallscope profile` found them by, with its details), and for a
    continuous trace its window, summary and captures (`continuous`)."""
    extra: dict[str, Any] = {} if continuous is None else {"continuous": dict(continuous)}
    return extra | {
        "status": "stopped",
        "stop_clock": {"monotonic_ns": monotonic_ns, "realtime_ns": realtime_ns},
        "threads": list(threads),
        "drops": {
            "ring_full": sum(int(t["dropped"]) for t in threads),
            "no_thread_slot": no_thread_slot,
            "nesting_too_deep": nesting_too_deep,
        },
        "events_written": events_written,
        "backends": dict(backends),
        "file": file,
        "steps": steps,
        "step_source": dict(step_source),
    }


def clock_offsets(
    run_dir: Path,
    stem: str,
    *,
    method: str,
    samples: Sequence[Mapping[str, int]],
    problems: Sequence[str],
) -> dict[str, Any]:
    """The ``clock`` entry with the offsets to rank 0 measured so far (merged into the clock
    source the trace wrote at start)."""
    doc = read_run_json(run_dir)
    clock = dict((doc.get("processes", {}).get(stem) or {}).get("clock") or {})
    clock.update(reference_rank=0, method=method, offsets=list(samples))
    if problems:
        clock["problems"] = list(problems)
    return {"clock": clock}


def _jsonable(v: Any) -> Any:
    """JSON types only (trace metadata is free-form)."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def imported(
    meta: Any, *, rank: int, pid: int, events_written: int, steps: int, file: str
) -> dict[str, Any]:
    """The entry of one rank of an imported Kineto trace (`meta`: its KinetoImport metadata)."""
    return {
        "status": "stopped",
        "source": "kineto",
        "source_file": str(meta.path.resolve()),
        "rank": rank,
        "world_size": meta.world_size,
        "pid": pid,
        "clock": {"source": "kineto", "unit": "ns", "base_ns": meta.base_ns},
        "kineto": _jsonable(
            {
                "distributedInfo": meta.distributed_info,
                "deviceProperties": meta.device_properties,
                "metadata": meta.metadata,
                "ts_float": meta.ts_float,
                "problems": meta.problems,
            }
        ),
        "events_written": events_written,
        "steps": steps,
        "file": file,
    }
