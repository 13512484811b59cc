"""Turns drained column chunks into Parquet files: one part file per flush interval while the
trace runs, merged into one file (a row group per part) when it stops."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from stallscope import _core
from stallscope._schema import CATEGORIES, KIND_ID, KINDS
from stallscope._schema._classify import gpu_category_of
from stallscope.capture._continuous import Continuous
from stallscope.io._event_files import merge_parts, write_atomic
from stallscope.io._run_dir import part_path

_COUNTER = KIND_ID["counter"]
# GPU activity from the CUPTI backend arrives with this category (csrc/cupti/activity_backend.h
# kCategoryUnclassified): its category comes from the one shared classifier
# (_schema/_classify.py), in its plain-Python form (no Polars here, see below), evaluated once per
# distinct name.
_UNCLASSIFIED = 0xFF
_gpu_categories: dict[int, tuple[str, int]] = {}  # name id -> (name, category id)


class StringCache:
    """The process string table, mirrored incrementally (ids only ever grow)."""

    def __init__(self) -> None:
        self._strings: list[str] = []
        self.names: pa.Array = pa.array([], pa.string())  # id -> string; id 0 is ""
        self.details: pa.Array = pa.array([], pa.string())  # id -> string; id 0 is null

    def update(self, max_id: int) -> None:
        if max_id >= len(self._strings):
            new = _core.strings_from(len(self._strings))
            if new:
                self._strings.extend(new)
                self.names = pa.array(self._strings, pa.string())
                self.details = pa.array([None, *self._strings[1:]], pa.string())


# Writing uses Arrow, not Polars, on purpose: a traced process may be a fork()ed child (a
# DataLoader worker), and Polars' thread pool does not survive fork() (its first parallel
# operation in the child deadlocks) while Arrow re-creates its pools after fork.
_KIND_DICT = pa.array(list(KINDS), pa.string())
_CATEGORY_DICT = pa.array(list(CATEGORIES), pa.string())


def _enum_field(name: str, values: tuple[str, ...]) -> pa.Field:
    # Polars reads a dictionary column carrying this field metadata as an Enum of `values`
    # without a cast (it is how Polars itself writes Enums); any other reader, or a Polars
    # that ignores the key, sees dictionary-encoded strings and load() casts them.
    marker = "".join(f"{len(v)};{v}" for v in values)
    return pa.field(
        name,
        pa.dictionary(pa.uint8(), pa.string(), ordered=True),
        metadata={"_PL_ENUM_VALUES2": marker},
    )


_ARROW_SCHEMA = pa.schema(
    [
        pa.field("rank", pa.int32()),
        pa.field("pid", pa.int32()),
        _enum_field("kind", KINDS),
        _enum_field("category", CATEGORIES),
        pa.field("name", pa.string()),
        pa.field("start_ns", pa.int64()),
        pa.field("end_ns", pa.int64()),
        pa.field("lane", pa.int32()),
        pa.field("device", pa.int16()),
        pa.field("correlation", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("value", pa.float64()),
        pa.field("detail", pa.string()),
    ]
)


def _gpu_category_ids(
    name_id: np.ndarray, category: np.ndarray, strings: StringCache
) -> np.ndarray:
    """`category` with the rows the CUPTI backend left unclassified (kernels, copies, memsets,
    syncs) classified from their names by the shared classifier."""
    todo = category == _UNCLASSIFIED
    if not todo.any():
        return category
    ids = np.unique(name_id[todo])
    cats = np.empty(len(ids), np.uint8)
    for j, i in enumerate(ids.tolist()):
        name = strings.names[i].as_py() or ""
        hit = _gpu_categories.get(i)
        if hit is None or hit[0] != name:
            hit = (name, CATEGORIES.index(gpu_category_of(name)))
            _gpu_categories[i] = hit
        cats[j] = hit[1]
    out = category.copy()
    out[todo] = cats[np.searchsorted(ids, name_id[todo])]
    return out


def chunk_to_table(
    cols: dict[str, np.ndarray], rank: int, pid: int, strings: StringCache
) -> pa.Table:
    """One drained chunk (NumPy columns from _core.drain) as an Arrow table in the event schema
    (kind and category dictionary-encoded, marked as Polars Enums)."""
    n = len(cols["start_ns"])
    name_id = cols["name_id"]
    detail_id = cols["detail_id"]
    strings.update(int(max(name_id.max(initial=0), detail_id.max(initial=0))))
    kind = cols["kind"]
    is_counter = kind == _COUNTER
    bytes_ = cols["bytes"]
    value = pa.array(bytes_.view(np.float64), mask=~is_counter)
    if is_counter.any():
        bytes_ = np.where(is_counter, 0, bytes_)
    category = _gpu_category_ids(name_id, cols["category"], strings)
    return pa.Table.from_arrays(
        [
            pa.array(np.full(n, rank, np.int32)),
            pa.array(np.full(n, pid, np.int32)),
            pa.DictionaryArray.from_arrays(pa.array(kind, pa.uint8()), _KIND_DICT, ordered=True),
            pa.DictionaryArray.from_arrays(
                pa.array(category, pa.uint8()), _CATEGORY_DICT, ordered=True
            ),
            strings.names.take(name_id),
            pa.array(cols["start_ns"]),
            pa.array(cols["end_ns"]),
            pa.array(cols["lane"]),
            pa.array(cols["device"]),
            pa.array(cols["correlation"]),
            pa.array(bytes_),
            value,
            strings.details.take(detail_id),
        ],
        schema=_ARROW_SCHEMA,
    )


class RankWriter:
    """Background thread: drains the rings every `poll_s` and writes a part file every
    `flush_interval_s`. The GIL is released while the core drains and while Parquet encodes.
    In continuous mode (`continuous`), every chunk and part also goes to the window, the
    summary and the on-demand captures (capture/_continuous.py)."""

    def __init__(
        self,
        out_dir: Path,
        stem: str,
        rank: int,
        pid: int,
        flush_interval_s: float,
        continuous: Continuous | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.continuous = continuous
        self.stem = stem
        self.rank = rank
        self.pid = pid
        self.flush_interval_s = flush_interval_s
        self.poll_s = min(0.1, flush_interval_s / 4)
        self.strings = StringCache()
        self.parts: list[Path] = []  # the part files on disk, in order
        self._next_part = 0  # the next part's number (a continuous trace deletes old parts)
        self.events_written = 0
        self.error: BaseException | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._lock = threading.Lock()  # serialises drain+write between the thread and stop()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stallscope-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _drain(self) -> None:
        cols = _core.drain()
        if len(cols["start_ns"]):
            table = chunk_to_table(cols, self.rank, self.pid, self.strings)
            self._pending.append(table)
            self._pending_rows += table.num_rows
            if self.continuous is not None:
                self.continuous.on_chunk(table)

    def _write_part(self) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        path = part_path(self.out_dir, self.stem, self._next_part)
        write_atomic(table, path)
        self._next_part += 1
        self.parts.append(path)
        self.events_written += table.num_rows
        self._pending.clear()
        self._pending_rows = 0
        if self.continuous is not None:
            gone = set(self.continuous.on_part(path, table, _core.now_ns()))
            if gone:
                self.parts = [p for p in self.parts if p not in gone]

    def _run(self) -> None:
        # Parts are written on a fixed schedule (every flush_interval_s), so a SIGKILL loses at
        # most the events of the interval in progress; drains in between keep the rings short.
        next_write = time.monotonic() + self.flush_interval_s
        while True:
            wait = max(0.0, min(self.poll_s, next_write - time.monotonic()))
            if self._stop.wait(wait):
                return
            try:
                with self._lock:
                    if self.continuous is not None:
                        self.continuous.poll()
                    self._drain()
                    now = time.monotonic()
                    if now >= next_write or self._pending_rows >= 4_000_000:
                        self._write_part()
                        next_write = now + self.flush_interval_s
                        if self.continuous is not None:
                            self.continuous.tick(_core.now_ns())
            except BaseException as e:  # keep training alive; reported at stop
                self.error = e
                return

    def close(self) -> Path | None:
        """Stop the thread, write everything still buffered, merge the parts. Returns the final
        file, or None when nothing was recorded."""
        self._stop.set()
        self._thread.join(timeout=60)
        with self._lock:
            self._drain()
            self._write_part()
            if self.continuous is not None:
                self.continuous.finish(_core.now_ns())
        if self.error is not None:
            raise self.error
        return merge_parts(self.out_dir, self.stem, self.parts)
