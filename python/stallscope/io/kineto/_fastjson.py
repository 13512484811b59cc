"""The fast reader of Kineto JSON: msgspec decodes only the fields the importer uses (unknown
keys such as Input Dims, grid, block are skipped without building Python objects), then each
field becomes a string column, the layout _parse produces (so values convert exactly the same
way: a float's str() is its shortest round-trip form, as in the file).

Returns None when the document does not fit the typed layout (an event that is not an object,
args that are not an object): the caller then takes its general path. msgspec is imported on
first use (its import and the decoder's construction cost a few ms)."""

from __future__ import annotations

import functools
import gc
from operator import attrgetter
from pathlib import Path
from typing import Any

import polars as pl

from stallscope.exceptions import TraceImportError


@functools.cache
def _decoder() -> Any:
    import msgspec

    # Built with defstruct (not class syntax): the fields come from the tables below.
    args_names = {a: k for a, k in _ARG_ATTRS.items() if a != k}
    args_t: Any = msgspec.defstruct(
        "Args", [(a, Any, None) for a in _ARG_ATTRS], rename=args_names, gc=False
    )
    event_t: Any = msgspec.defstruct(
        "Event",
        [*((f, Any, None) for f in _EVENT_FIELDS), ("args", args_t | None, None)],
        gc=False,
    )
    trace_t: Any = msgspec.defstruct(
        "Trace",
        [("traceEvents", list[event_t] | None, None), *((k, Any, None) for k in META_KEYS)],
    )
    _EMPTY.append(args_t())
    return msgspec.json.Decoder(trace_t)


_EVENT_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp")
META_KEYS = ("distributedInfo", "deviceProperties", "baseTimeNanoseconds", "schemaVersion",
              "displayTimeUnit", "traceName", "trace_id", "cupti_version", "cuda_runtime_version",
              "cuda_driver_version", "record_shapes", "profile_memory", "with_stack")  # fmt: skip
_EMPTY: list[Any] = []  # one Args() with every field None, for events without args

# Args struct attribute -> the Kineto key (the raw frame's field name).
_ARG_ATTRS = {
    "ext": "External id",
    "stream": "stream",
    "correlation": "correlation",
    "bytes": "bytes",
    "device": "device",
    "cuda_sync_kind": "cuda_sync_kind",
    "coll": "Collective name",
    "in_nelems": "In msg nelems",
    "out_nelems": "Out msg nelems",
    "group_size": "Group size",
    "dtype": "dtype",
    "pg": "Process Group Name",
    "pg_desc": "Process Group Description",
    "pg_ranks": "Process Group Ranks",
    "rank_start": "Global rank start",
    "rank_stride": "Global rank stride",
}
_RARE = ("coll", "in_nelems", "out_nelems", "group_size", "dtype", "pg", "pg_desc", "pg_ranks",
         "rank_start", "rank_stride")  # fmt: skip


def _column(values: list[Any]) -> pl.Series:
    """A column from one field's values. Numbers stay numbers (Int64, or Float64 when any is a float: HTA's float-ts rule), text
    stays text; anything mixed becomes strings, which the converter reads the same way."""
    try:
        s = pl.Series(values)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        s = pl.Series(values, dtype=pl.String, strict=False)
    if not (s.dtype.is_numeric() or s.dtype in (pl.String, pl.Null)) or s.dtype == pl.Boolean:
        s = pl.Series(values, dtype=pl.String, strict=False)
    return s


def _ints(values: list[Any]) -> pl.Series:
    try:
        return pl.Series(values, dtype=pl.Int64)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(values, dtype=pl.Int64, strict=False)


def parse_fast(holder: list[bytes], path: Path) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    import msgspec

    decoder = _decoder()
    enabled = gc.isenabled()
    gc.disable()  # ~10^5 new objects: the cyclic collector would rescan them again and again
    try:
        return _parse(decoder, msgspec, holder, path)
    finally:
        if enabled:
            gc.enable()


def _parse(
    decoder: Any, msgspec: Any, holder: list[bytes], path: Path
) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    try:
        doc = decoder.decode(holder[0])
    except msgspec.ValidationError:
        return None
    except (msgspec.DecodeError, UnicodeDecodeError) as e:  # bad UTF-8 raises the latter
        raise TraceImportError(
            f"{path}: not valid JSON ({e}); is the file complete? (a profiler killed while "
            "writing leaves a truncated trace)"
        ) from None
    # Decoded: the text is no longer needed (the caller passed its only reference in holder).
    holder.clear()
    events = doc.traceEvents
    if events is None:
        raise TraceImportError(
            f"{path}: no 'traceEvents' list: not a Kineto / Chrome trace JSON (export it with "
            "torch.profiler's export_chrome_trace or tensorboard_trace_handler)"
        )
    doc.traceEvents = None
    n = len(events)
    cols: dict[str, pl.Series] = {}
    for f in ("ph", "cat", "name", "ts", "dur"):
        cols[f] = _column(list(map(attrgetter(f), events)))
    for f in ("pid", "tid"):  # ints; the odd "Spans" / "PyTorch Profiler" row becomes null
        cols[f] = _ints(list(map(attrgetter(f), events)))
    # Flow ids are read on flow rows only.
    flows = [i for i, e in enumerate(events) if e.ph in ("s", "f", "t")]
    ids: list[Any] = [None] * n
    for i in flows:
        ids[i] = events[i].id
    cols["id"] = _column(ids)
    cols["bp"] = pl.Series([None] * n, dtype=pl.String)
    empty: Any = _EMPTY[0]
    args = [e.args if e.args is not None else empty for e in events]
    present = [e.args is not None for e in events]
    del events
    fields: dict[str, pl.Series] = {}
    # NCCL metadata sits on a few record_param_comms rows: read those rows only.
    nccl = [i for i, a in enumerate(args) if a.coll is not None]
    for attr, key in _ARG_ATTRS.items():
        if attr in _RARE:
            vals: list[Any] = [None] * n
            for i in nccl:
                vals[i] = getattr(args[i], attr)
        else:
            vals = list(map(attrgetter(attr), args))
        fields[key] = _column(vals)
    del args
    struct = pl.DataFrame(fields).to_struct("args")
    struct = (
        pl.select(pl.when(pl.Series(present, dtype=pl.Boolean)).then(struct))
        .to_series()
        .alias("args")
    )
    frame = pl.DataFrame({**cols, "args": struct})
    meta = {k: v for k in META_KEYS if (v := getattr(doc, k)) is not None}
    return frame, meta
