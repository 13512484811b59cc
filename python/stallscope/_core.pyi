"""Typed stub of the native module (csrc/bindings). Private: use the stallscope package."""

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeVar

import numpy as np
import numpy.typing as npt

_F = TypeVar("_F", bound=Callable[..., Any])

KIND_NAMES: Final[list[str]]
CATEGORY_NAMES: Final[list[str]]
RECORD_SIZE: Final[int]
RECORD_OFFSETS: Final[dict[str, int]]

# clock
def now_ns() -> int: ...
def realtime_ns() -> int: ...

# ring pool and collector
def configure(max_threads: int, ring_capacity: int) -> None: ...
def configured() -> bool: ...
def ring_capacity() -> int: ...
def max_threads() -> int: ...
def set_recording(on: bool) -> None: ...
def recording() -> bool: ...
def drain(max_events: int = ...) -> dict[str, npt.NDArray[Any]]: ...
def buffered() -> int: ...
def discard() -> int: ...
def intern(s: str) -> int: ...
def strings_from(first: int = 0) -> list[str]: ...
def string_count() -> int: ...
def thread_stats() -> list[dict[str, Any]]: ...
def reset_stats() -> None: ...
def no_slot_drops() -> int: ...

# generic recording
def record(
    kind: int,
    category: int,
    name_id: int,
    start_ns: int,
    end_ns: int,
    correlation: int = 0,
    bytes: int = 0,
    lane: int = 0,
    device: int = -1,
    detail_id: int = 0,
) -> bool: ...
def record_columns(
    start_ns: npt.NDArray[np.int64],
    end_ns: npt.NDArray[np.int64],
    correlation: npt.NDArray[np.int64],
    bytes: npt.NDArray[np.int64],
    name_id: npt.NDArray[np.uint32],
    detail_id: npt.NDArray[np.uint32],
    lane: npt.NDArray[np.int32],
    device: npt.NDArray[np.int16],
    kind: npt.NDArray[np.uint8],
    category: npt.NDArray[np.uint8],
) -> int: ...
def stress_record(
    threads: int, n: int, name_id: int = 0, read_clock: bool = False
) -> tuple[list[int], list[int]]: ...
def current_lane() -> int: ...

# the Python hot path
class Region:
    def __init__(self, name: str, category: str | int | None = ..., kind: int = ...) -> None: ...
    def __enter__(self) -> Region: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...
    @property
    def name(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def kind(self) -> str: ...

def step(at_ns: int | None = None, /) -> int: ...
def mark(name: str, /) -> None: ...
def counter(name: str, value: float, /) -> None: ...
def record_event(
    kind: int,
    category: int,
    name_id: int,
    start_ns: int,
    end_ns: int,
    correlation: int,
    bytes: int,
    lane: int,
    detail_id: int,
    /,
) -> bool: ...
def step_index() -> int: ...
def reset_step_index(value: int = 0) -> None: ...
def set_step_hook(hook: Callable[[int], object] | None, at: int = 1) -> None: ...
def set_step_hook_at(at: int) -> None: ...
def step_hook_at() -> int: ...
def too_deep_drops() -> int: ...

# the CUPTI activity backend (csrc/cupti, bind_cupti.cc)
def cupti_load(candidates: list[str]) -> dict[str, Any]: ...
def cupti_loaded() -> bool: ...
def cupti_driver_loadable() -> tuple[bool, str]: ...
def cupti_start(
    buffer_bytes: int = ...,
    pool_limit_bytes: int = ...,
    flush_period_ms: int = ...,
    device_buffer_bytes: int = ...,
    runtime_api: bool = ...,
    markers: bool = ...,
    overhead: bool = ...,
    external_correlation: bool = ...,
) -> dict[str, Any]: ...
def cupti_stop(finalize: bool = ...) -> dict[str, int]: ...
def cupti_stats() -> dict[str, int]: ...
def cupti_flush(forced: bool = ...) -> int: ...
def cupti_probe_subscriber() -> int: ...
def cupti_active() -> bool: ...
def cupti_result_name(code: int) -> str: ...

# Kineto trace scanner (csrc/kineto): columns of traceEvents from the JSON bytes, or the reason
# (str) why the general reader must take the document.
class KinetoScanner:
    """Streaming reader of Kineto JSON; string dictionaries shared by the files read."""

    def __init__(self, split_min: int = ..., fill_bytes: int = ...) -> None: ...
    def begin_file(self, text_bytes: int = 0) -> None: ...
    def feed(self, chunk: bytes | bytearray | memoryview) -> bool: ...
    def feed_from(self, readinto: Callable[[memoryview], int | None]) -> bool: ...
    def end_file(self) -> dict[str, Any] | str: ...
    def release_buffers(self) -> None: ...
    def adopt(
        self, other: KinetoScanner
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32]]: ...
    def strings(self, which: str, start: int = 0) -> list[str]: ...
    @property
    def splits_taken(self) -> int: ...
    @property
    def splits_missed(self) -> int: ...

def trim_heap() -> bool: ...

class DetailJob:
    """The detail column of kineto_convert's rows (see io/kineto/_native.py), its buffers sized
    on the thread that made the job."""

    def start(self, threads: int = 1) -> None:
        """Write the rows on `threads` threads of their own, the parts not taken by them on
        the caller's in result() (which waits for them)."""
    def result(self) -> ArrowColumn:
        """The column (written here unless start() was called)."""

def kineto_detail(
    cat: npt.NDArray[np.int32],
    cat_table: list[str],
    ext: npt.NDArray[np.int64],
    sync: npt.NDArray[np.int32],
    sync_table: list[str],
) -> DetailJob:
    """A DetailJob: the codes checked (IndexError past a table) and the buffers sized here."""

def kineto_convert(
    cols: dict[str, npt.NDArray[Any]] | Sequence[dict[str, npt.NDArray[Any]]],
    cat_kind: npt.NDArray[np.uint8],
    cat_drop: npt.NDArray[np.uint8],
    name_step: npt.NDArray[np.int64],
    name_gpu_cat: npt.NDArray[np.uint8],
    kind_gpu: npt.NDArray[np.uint8],
    kind_order: npt.NDArray[np.uint8],
    ranks: list[int],
    bases: list[int],
    sizes: list[int],
    mark_cat0: int,
    mark_name: int,
    threads: int = 2,
    links: bool = True,
    null_name: int = -1,
) -> dict[str, npt.NDArray[Any]]:
    """Scanner columns of each file (a dict per file, or one dict of every file's in file order,
    split by sizes) -> event-schema columns sorted by rank, start, event index, file, with one
    trace mark per file; rows of the categories cat_drop marks are left out (out_row -1;
    file_kept counts the rows kept per file) (csrc/kineto/row_convert.h). threads: the most
    threads to use, this one included (more than one from kineto_convert_threads_min rows on;
    more than two for several files of one rank each, a thread converting whole files).
    links: also index, kind_order and out_row (what placing NCCL collectives needs; absent
    otherwise). null_name: the name code of rows whose name is -1 (none; -1: such rows are
    refused with IndexError)."""

def kineto_cat_counts(
    cat: npt.NDArray[np.int32], correlation: npt.NDArray[np.int64], n_cat: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(rows per cat code, rows per cat code without a correlation) of one file's scanner
    columns, n_cat entries each (IndexError for a code outside them)."""

kineto_convert_threads_min: int
kineto_prefault_min: int  # rows from which a helper faults the output's pages in (threads 2)

# Arrow C data interface (csrc/arrow): columns for Polars without NumPy's constructors
class ArrowColumn:
    """A column in Arrow buffers owned by the extension; pl.Series(col) takes it."""

    def __arrow_c_array__(
        self, requested_schema: object | None = None
    ) -> tuple[object, object]: ...
    def __len__(self) -> int: ...
    @property
    def format(self) -> str: ...
    @property
    def null_count(self) -> int: ...

def arrow_numeric(values: npt.NDArray[Any], name: str = "") -> ArrowColumn: ...
def arrow_strings(
    table: list[str], codes: npt.NDArray[np.int32] | npt.NDArray[np.int64], name: str = ""
) -> ArrowColumn: ...
def arrow_enum(
    codes: npt.NDArray[np.uint8], categories: list[str], name: str = ""
) -> ArrowColumn: ...
def dictionary_codes(
    column: object, categories: int, null_code: int = 0
) -> npt.NDArray[np.uint8] | npt.NDArray[np.uint32]: ...
def column_key(column: object) -> tuple[str | int, ...] | None: ...
def string_codes(
    column: object,
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64], list[str]]: ...
def string_codes_where(
    column: object, kind: npt.NDArray[np.uint8], kinds: npt.NDArray[np.uint8]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32], list[str]]: ...
def hta_rows(
    kind: npt.NDArray[np.uint8],
    rank: npt.NDArray[np.int32],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    lane: npt.NDArray[np.int32],
    correlation: npt.NDArray[np.int64],
    name: npt.NDArray[np.uint32],
    hta_kind: npt.NDArray[np.uint8],
    gpu_kind: npt.NDArray[np.uint8],
    runtime_kind: int,
    name_sync: npt.NDArray[np.uint8],
    name_step: npt.NDArray[np.uint8],
    facts: list[tuple[int, int, bool, int | None]],
    include_last_step: bool,
    gpu_only: bool = False,
) -> dict[str, npt.NDArray[Any]]: ...
def stall_sweep(
    kind: npt.NDArray[np.uint8],
    category: npt.NDArray[np.uint8],
    rank: npt.NDArray[np.int32],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    lane: npt.NDArray[np.int32],
    correlation: npt.NDArray[np.int64],
    corr_null: npt.NDArray[np.uint8] | None,
    labels_cpu: npt.NDArray[np.int8],
    labels_gpu: npt.NDArray[np.int8],
    gpu_kind: npt.NDArray[np.uint8],
    n_codes: int,
    step_kind: int,
    bucket_kind: int,
    comm_row: npt.NDArray[np.int64],
    comm_nnodes: npt.NDArray[np.int32],
    comm_async: npt.NDArray[np.uint8],
    comm_last: npt.NDArray[np.uint8],
    clocks: list[tuple[int, int, int, float]],
    gpu: bool,
    multi: list[int],
) -> dict[str, Any]: ...
def sync_split(
    row_rank: npt.NDArray[np.int32],
    row_start: npt.NDArray[np.int64],
    row_end: npt.NDArray[np.int64],
    x_rank: npt.NDArray[np.int32],
    x_start: npt.NDArray[np.int64],
    x_end: npt.NDArray[np.int64],
    x_network: npt.NDArray[np.uint8],
    w_rank: npt.NDArray[np.int32],
    w_start: npt.NDArray[np.int64],
    w_end: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...

# predictor: the engine's run, natively (csrc/predict/)
def engine_run(
    order: npt.NDArray[np.int32],
    stream: npt.NDArray[np.int32],
    n_streams: int,
    dep_ptr: npt.NDArray[np.int64],
    dep_idx: npt.NDArray[np.int32],
    wait_ptr: npt.NDArray[np.int64],
    wait_idx: npt.NDArray[np.int32],
    duration: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def engine_makespans(
    order: npt.NDArray[np.int32],
    stream: npt.NDArray[np.int32],
    n_streams: int,
    dep_ptr: npt.NDArray[np.int64],
    dep_idx: npt.NDArray[np.int32],
    wait_ptr: npt.NDArray[np.int64],
    wait_idx: npt.NDArray[np.int32],
    durations: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]: ...
def engine_makespans_by_slot(
    order: npt.NDArray[np.int32],
    stream: npt.NDArray[np.int32],
    n_streams: int,
    dep_ptr: npt.NDArray[np.int64],
    dep_idx: npt.NDArray[np.int32],
    wait_ptr: npt.NDArray[np.int64],
    wait_idx: npt.NDArray[np.int32],
    slot: npt.NDArray[np.int32],
    mult: npt.NDArray[np.float64],
    costs: npt.NDArray[np.float64],
) -> npt.NDArray[np.int64]: ...
def engine_order(
    stream: npt.NDArray[np.int32],
    n_streams: int,
    dep_ptr: npt.NDArray[np.int64],
    dep_idx: npt.NDArray[np.int32],
    wait_ptr: npt.NDArray[np.int64],
    wait_idx: npt.NDArray[np.int32],
) -> npt.NDArray[np.int32] | None: ...
def pipeline_graph(
    pp: int,
    micro_batches: int,
    interleave: int,
    layers_per_chunk: int,
    zero3: bool,
    dp_overlap: bool,
    tied: bool,
    param_gather: bool,
    detail: bool,
    p2p_blocking: bool = ...,
    dp_blocking: bool = ...,
    gather_after_backward: bool = ...,
) -> dict[str, npt.NDArray[Any]]: ...
