"""One Kineto (PyTorch profiler) JSON file -> a raw frame of its events plus its top-level metadata.

Fast path: Polars' JSON reader with an explicit schema (Rust, no Python object per event, unknown
keys skipped). Every scalar is read as a string: Polars writes a number read as a string in its
shortest round-trip form, so ``ts`` keeps its exact decimal digits (ns-resolution float
timestamps are converted to integer ns without binary rounding, see `_ns_from_decimal`).
When the file does not fit that schema (an argument that is a list where a scalar is expected, a
metadata block of an unexpected shape), the slow path parses it with orjson and normalises each
event in Python: slower, but the same result.
"""

from __future__ import annotations

import gzip
import io
import math
import re
import zlib
from pathlib import Path
from typing import Any, Final

import orjson
import polars as pl

from stallscope.exceptions import TraceImportError
from stallscope.io.kineto._fastjson import parse_fast

# The event args the importer and the HTA views use; all read as strings.
ARG_KEYS: Final[tuple[str, ...]] = (
    "External id",
    "stream",
    "correlation",
    "bytes",
    "device",
    "cuda_sync_kind",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "Group size",
    "dtype",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "Global rank start",
    "Global rank stride",
)
EVENT_KEYS: Final[tuple[str, ...]] = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp")

_ARGS = pl.Struct({k: pl.String() for k in ARG_KEYS})
_EVENT = pl.Struct({**{k: pl.String() for k in EVENT_KEYS}, "args": _ARGS})
_DIST = pl.Struct(
    {
        "backend": pl.String(),
        "rank": pl.String(),
        "world_size": pl.String(),
        "pg_count": pl.String(),
        "nccl_version": pl.String(),
    }
)
_DEVICE_KEYS: Final[tuple[str, ...]] = (
    "id",
    "name",
    "totalGlobalMem",
    "computeMajor",
    "computeMinor",
    "maxThreadsPerBlock",
    "maxThreadsPerMultiprocessor",
    "regsPerBlock",
    "regsPerMultiprocessor",
    "warpSize",
    "sharedMemPerBlock",
    "sharedMemPerMultiprocessor",
    "numSms",
    "sharedMemPerBlockOptin",
)
_SCALAR_META: Final[tuple[str, ...]] = (
    "schemaVersion",
    "baseTimeNanoseconds",
    "displayTimeUnit",
    "traceName",
    "trace_id",
    "cupti_version",
    "cuda_runtime_version",
    "cuda_driver_version",
    "record_shapes",
    "profile_memory",
    "with_stack",
)
FAST_SCHEMA: Final[dict[str, pl.DataType]] = {
    "traceEvents": pl.List(_EVENT),
    "distributedInfo": _DIST,
    "deviceProperties": pl.List(pl.Struct({k: pl.String() for k in _DEVICE_KEYS})),
    **{k: pl.String() for k in _SCALAR_META},
}


def read_bytes(path: Path) -> bytes:
    """The file's JSON text (gunzipped when it is gzip). TraceImportError when unreadable."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceImportError(f"{path}: cannot read ({e.strerror or e})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceImportError(
                f"{path}: corrupt or truncated gzip ({e}); re-copy the trace or gunzip it to check"
            ) from None
    return raw


def _fmt(v: Any) -> str | None:
    """A JSON scalar as the string Polars' reader would give; None for null, lists, objects."""
    if v is None or isinstance(v, (list, dict)):
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        return str(int(v)) if v.is_integer() and abs(v) < 1e16 else repr(v)
    return str(v)


def _slow(raw: bytes, path: Path) -> tuple[pl.DataFrame, dict[str, Any]]:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise TraceImportError(
            f"{path}: not valid JSON ({e}); is the file complete? (a profiler killed while "
            "writing leaves a truncated trace)"
        ) from None
    if not isinstance(doc, dict):
        raise TraceImportError(
            f"{path}: not a Kineto trace: the top level is a {type(doc).__name__}, expected an "
            "object with 'traceEvents' (export with torch.profiler's export_chrome_trace)"
        )
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise TraceImportError(_no_events(path))
    rows: list[dict[str, Any]] = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        row: dict[str, Any] = {k: _fmt(ev.get(k)) for k in EVENT_KEYS}
        a = ev.get("args")
        if isinstance(a, dict):
            row["args"] = {
                k: (orjson.dumps(v).decode() if isinstance(v, list) else _fmt(v))
                for k in ARG_KEYS
                if (v := a.get(k)) is not None
            }
        else:
            row["args"] = None
        rows.append(row)
    frame = pl.DataFrame({"traceEvents": [rows]}, schema={"traceEvents": pl.List(_EVENT)})
    meta = {k: v for k, v in doc.items() if k != "traceEvents"}
    return _explode(frame), meta


def _no_events(path: Path) -> str:
    return (
        f"{path}: no 'traceEvents' list: not a Kineto / Chrome trace JSON (export it with "
        "torch.profiler's export_chrome_trace or tensorboard_trace_handler)"
    )


def _explode(df: pl.DataFrame) -> pl.DataFrame:
    return (
        df.select(pl.col("traceEvents").explode())
        .filter(pl.col("traceEvents").is_not_null())
        .unnest("traceEvents")
    )


def _meta_from_row(row: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for k in _SCALAR_META:
        if row.get(k) is not None:
            meta[k] = row[k]
    if row.get("distributedInfo") is not None:
        meta["distributedInfo"] = {k: v for k, v in row["distributedInfo"].items() if v is not None}
    if row.get("deviceProperties") is not None:
        meta["deviceProperties"] = [
            {k: v for k, v in d.items() if v is not None}
            for d in row["deviceProperties"]
            if d is not None
        ]
    return meta


_FIRST = re.compile(rb"\s*")  # leading whitespace, matched without copying the text


def parse(raw: bytes, path: Path) -> tuple[pl.DataFrame, dict[str, Any]]:
    """`parse_owned` for a caller that keeps its own reference to the text."""
    return parse_owned([raw], path)


def parse_owned(holder: list[bytes], path: Path) -> tuple[pl.DataFrame, dict[str, Any]]:
    """(events, metadata): one row per trace event with columns ph, cat, name, pid, tid, ts,
    dur, id, bp (strings) and args (struct of ARG_KEYS, strings); metadata = the top-level keys
    other than traceEvents. TraceImportError for malformed JSON or a missing traceEvents list."""
    raw = holder[0]
    first = _FIRST.match(raw)
    start = raw[first.end() : first.end() + 1] if first else b""
    if start != b"{":
        if not raw.strip():
            raise TraceImportError(f"{path}: empty file: not a Kineto trace")
        return _slow(raw, path)
    del raw
    fast = parse_fast(holder, path)
    if fast is not None:
        return fast
    raw = holder[0]
    try:
        top = pl.read_json(io.BytesIO(raw), schema=FAST_SCHEMA)
    except Exception:  # any mismatch with the fast schema: the slow path decides
        return _slow(raw, path)
    if top.height != 1 or top["traceEvents"].null_count() == 1:
        raise TraceImportError(_no_events(path))
    meta = _meta_from_row(top.drop("traceEvents").row(0, named=True))
    events = _explode(top.select("traceEvents"))
    del top
    if meta.get("distributedInfo") is not None or meta.get("deviceProperties") is not None:
        # pg_config and non-scalar fields are not in the fast schema: read them from the head.
        meta.update(_head_metadata(raw))
    return events, meta


def _head_metadata(raw: bytes) -> dict[str, Any]:
    """distributedInfo's full content (pg_config included) when it precedes traceEvents, as
    Kineto writes it; {} when it cannot be cut out cheaply."""
    out: dict[str, Any] = {}
    at = raw.find(b'"traceEvents"')
    if at <= 0:
        return out
    head = raw[:at].rstrip()
    if head.endswith(b","):
        head = head[:-1]
    try:
        doc = orjson.loads(head + b"}")
    except orjson.JSONDecodeError:
        return out
    if isinstance(doc, dict):
        for k in ("distributedInfo", "deviceProperties"):
            if isinstance(doc.get(k), (dict, list)):
                out[k] = doc[k]
    return out
