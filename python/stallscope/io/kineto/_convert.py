"""A raw Kineto event frame (from _parse) -> stallscope's event schema, vectorised.

Kinds by Kineto category (legacy names included): cpu_op / Operator / python_function /
user_annotation / ... -> region; ``ProfilerStep#N`` (any host category) -> step with correlation
N; cuda_runtime / cuda_driver / Runtime / mtia_runtime -> runtime; kernel / Kernel /
mtia_ccp_events -> kernel; gpu_memcpy / Memcpy -> memcpy; gpu_memset / Memset -> memset;
cuda_sync -> gpu_sync; gpu_user_annotation -> marker. GPU rows take their category from the one
shared classifier (_classify.gpu_category).

Time: ``start_ns = baseTimeNanoseconds + ts`` (ts in µs, converted from its exact decimal digits),
``end_ns = start_ns + dur``. What the HTA-identical views need beyond the schema travels in
``detail``: ``cat`` (the original category) and ``ext`` (External id); the per-file facts
(base_ns, whether ts was written as floats) travel in one ``mark`` event per rank named
`TRACE_MARK`.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from stallscope._schema import GPU_KINDS
from stallscope._schema._classify import gpu_category

NULL: Final = -(2**63)  # null in the importer's int64 columns (the scanner's kNull)
# ASCII classes only: Python's re and Polars' regex engine differ on Unicode \s and \d, and
# the native reader matches names with either (io/kineto/_name_facts.py).
STEP_RE: Final = r"ProfilerStep[\t\n\v\f\r ]*#[\t\n\v\f\r ]*([0-9]+)"

HOST_CATS: Final[frozenset[str]] = frozenset(
    {
        "cpu_op",
        "Operator",
        "operator",
        "python_function",
        "user_annotation",
        "cpu_instant_event",
        "cuda_profiler_range",
        "overhead",
        "Overhead",
        "python",
    }
)
KIND_OF_CAT: Final[dict[str, str]] = {
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "Runtime": "runtime",
    "runtime": "runtime",
    "mtia_runtime": "runtime",
    "kernel": "kernel",
    "Kernel": "kernel",
    "mtia_ccp_events": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "cuda_sync": "gpu_sync",
    "gpu_user_annotation": "marker",
    **dict.fromkeys(HOST_CATS, "region"),
}
_MAX_NS: Final = 2 * 10**18  # |ts| and dur bound: base (< 4e18) + ts + dur stays in int64
FLOW_CATS: Final[tuple[str, ...]] = ("ac2g", "async_cpu_to_gpu")

# Why rows are dropped, as the import warning words it (both readers count the same reasons).
PROBLEMS: Final[dict[str, str]] = {
    "no_dur": "complete events ('ph': 'X') without 'dur'",
    "no_cat": "events without 'cat'",
    "bad_time": "events with an unparseable 'ts' or 'dur'",
    "negative_dur": "events with a negative 'dur'",
}


def unknown_categories(cats: list[str]) -> str:
    """The warning's words for rows of unknown categories (the first five named)."""
    return f"events of unknown categories (kept as host regions): {', '.join(sorted(cats)[:5])}"


# Bytes per element of torch dtypes as Kineto's NCCL metadata names them.
DTYPE_BYTES: Final[dict[str, int]] = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Int": 4,
    "Long": 8,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
}


def ns_from_decimal(s: pl.Expr) -> pl.Expr:
    """Integer ns from a decimal µs string, exactly (``"4458676522690.655"`` ->
    4458676522690655); scientific notation goes through float64. Null when unparseable or
    beyond ±9e15 µs."""
    g = s.str.extract_groups(r"^(-?)(\d{1,16})(?:\.(\d+))?$")
    ip = g.struct.field("2").cast(pl.Int64, strict=False)
    ip = pl.when(ip < 9_000_000_000_000_000).then(ip)  # x1000 stays within int64
    frac = (g.struct.field("3").fill_null("") + "000").str.slice(0, 3).cast(pl.Int64, strict=False)
    exact = ip * 1000 + frac
    exact = pl.when(g.struct.field("1") == "-").then(-exact).otherwise(exact)
    f = s.cast(pl.Float64, strict=False)
    approx = pl.when(f.abs() < 9e15).then((f * 1000.0).round(0)).cast(pl.Int64, strict=False)
    return pl.coalesce(exact, approx)


def _int(s: pl.Expr) -> pl.Expr:
    """An integer from a JSON scalar read as a string ("7", "7.0" -> 7); null otherwise."""
    return pl.coalesce(
        s.cast(pl.Int64, strict=False),
        pl.when(s.str.contains(r"^-?\d{1,15}\.0*$"))
        .then(s.str.extract(r"^(-?\d+)", 1))
        .cast(pl.Int64, strict=False),
    )


_DETAIL_UNSAFE: Final = ";="  # separators of ``detail``: replaced by "_" inside values
_CLEAN_TABLE: Final = str.maketrans(_DETAIL_UNSAFE, "_" * len(_DETAIL_UNSAFE))


def clean(s: pl.Expr) -> pl.Expr:
    """A value safe inside ``detail`` (no ``;`` or ``=``)."""
    return s.str.replace_all(f"[{_DETAIL_UNSAFE}]", "_")


def clean_str(s: str) -> str:
    """`clean` for one Python string (the native reader's per-dictionary-entry tables)."""
    return s.translate(_CLEAN_TABLE)


def ns_from_float(s: pl.Expr) -> pl.Expr:
    """Integer ns from float64 µs, exactly for values written with <= 3 decimals (below 2**43 µs
    the double is within half a ns of the decimal, so the rounded fraction is the written one)."""
    ip = s.floor()
    frac_ns = ((s - ip) * 1000.0).round(0)
    ok = s.is_finite() & (s.abs() < 9e15)
    return pl.when(ok).then(ip.cast(pl.Int64, strict=False) * 1000 + frac_ns.cast(pl.Int64))


def _as_int(s: pl.Series) -> pl.Series:
    if s.dtype == pl.String:
        return s.to_frame("v").select(_int(pl.col("v"))).to_series().alias(s.name)
    if s.dtype.is_integer() or s.dtype.is_float() or s.dtype == pl.Null:
        return s.cast(pl.Int64, strict=False)
    return pl.Series(s.name, [None] * len(s), dtype=pl.Int64)


def _as_ns(s: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(ns, written as a float) per row."""
    if s.dtype == pl.String:
        ns = s.to_frame("v").select(ns_from_decimal(pl.col("v"))).to_series()
        return ns, s.str.contains(r"[.eE]").fill_null(False)
    if s.dtype.is_integer():
        big = s.abs() >= 9_000_000_000_000_000
        return (
            pl.select(pl.when(~big).then(s.cast(pl.Int64) * 1000)).to_series(),
            pl.Series([False] * len(s)),
        )
    if s.dtype.is_float():
        ns = s.to_frame("v").select(ns_from_float(pl.col("v"))).to_series()
        return ns, s.is_not_null()
    return pl.Series([None] * len(s), dtype=pl.Int64), pl.Series([False] * len(s))


def _as_str(s: pl.Series) -> pl.Series:
    return s if s.dtype == pl.String else s.cast(pl.String, strict=False)


def normalise(raw: pl.DataFrame) -> pl.DataFrame:
    """Typed columns from a raw frame whose scalars are strings (general reader) or numbers
    (fast reader): ph, cat, name, bp, the string args (String); pid, tid, id, the numeric args
    (Int64); ts_ns, dur_ns (Int64 ns), ts_is_float; ``ts``/``dur`` stay as given (null checks)."""
    a = raw["args"].struct.unnest() if raw["args"].dtype != pl.Null else pl.DataFrame()
    cols: dict[str, pl.Series] = {}
    for c in ("ph", "cat", "name", "bp"):
        cols[c] = _as_str(raw[c])
    for c in ("pid", "tid", "id"):
        cols[c] = _as_int(raw[c])
    ts_ns, ts_is_float = _as_ns(raw["ts"])
    dur_ns, _ = _as_ns(raw["dur"])
    cols.update(ts_ns=ts_ns, dur_ns=dur_ns, ts_is_float=ts_is_float)
    cols["has_ts"] = raw["ts"].is_not_null()
    cols["has_dur"] = raw["dur"].is_not_null()
    n = raw.height
    for key in ("correlation", "stream", "External id", "device", "bytes", "Group size",
                "In msg nelems", "Out msg nelems"):  # fmt: skip
        cols[f"a:{key}"] = (
            _as_int(a[key]) if key in a.columns else pl.Series([None] * n, dtype=pl.Int64)
        )
    for key in ("cuda_sync_kind", "Collective name", "dtype", "Process Group Name",
                "Process Group Description", "Process Group Ranks"):  # fmt: skip
        cols[f"a:{key}"] = (
            _as_str(a[key]) if key in a.columns else pl.Series([None] * n, dtype=pl.String)
        )
    return pl.DataFrame({k: v.alias(k) for k, v in cols.items()})


def convert(
    raw: pl.DataFrame,
    *,
    rank: int,
    base_ns: int,
    problems: dict[str, int],
    normalised: bool = False,
) -> tuple[pl.DataFrame, bool]:
    """(events in the schema without the trace mark, ts_float). Rows that cannot be used are
    counted in `problems` (reason -> count). `normalised`: `raw` is already `normalise`'s
    output (the native reader's frame)."""
    lf = (
        (raw if normalised else normalise(raw))
        .lazy()
        .with_row_index("_i")
        .with_columns(
            pl.col("ph").fill_null(""),
            pl.col("cat").str.strip_chars(),
            corr=pl.col("a:correlation"),
            stream=pl.col("a:stream"),
            ext=pl.col("a:External id"),
        )
    )
    # ac2g flows (s at the runtime call, f at the GPU op; id = correlation) link rows of traces
    # whose events lack args.correlation.
    flows = (
        lf.filter(pl.col("ph").is_in(["s", "f", "t"]) & pl.col("cat").is_in(FLOW_CATS))
        .select("pid", "tid", "ts_ns", flow_corr=pl.col("id"))
        .drop_nulls()
        .unique(subset=["pid", "tid", "ts_ns"], keep="first")
    )
    x = lf.filter(pl.col("ph") == "X").rename({"ts_is_float": "ts_float"}).collect()
    linked = [c for c, k in KIND_OF_CAT.items() if k in (*GPU_KINDS, "runtime")]
    unlinked = x.filter(pl.col("corr").is_null() & pl.col("cat").is_in(linked))
    if unlinked.height:  # only traces without args.correlation pay for the flow join
        found = (
            unlinked.select("_i", "pid", "tid", "ts_ns")
            .join(flows.collect(), on=["pid", "tid", "ts_ns"], how="inner")
            .select("_i", "flow_corr")
        )
        if found.height:
            x = (
                x.join(found, on="_i", how="left", maintain_order="left")
                .with_columns(corr=pl.coalesce("corr", "flow_corr"))
                .drop("flow_corr")
            )

    # Problems: counted, the rows dropped (HTA drops rows without dur or cat, too).
    checks = {
        PROBLEMS["no_dur"]: ~pl.col("has_dur"),
        PROBLEMS["no_cat"]: pl.col("cat").is_null() & pl.col("has_dur"),
        PROBLEMS["bad_time"]: (
            pl.col("ts_ns").is_null()
            | pl.col("dur_ns").is_null()
            | (pl.col("ts_ns").abs() > _MAX_NS)
            | (pl.col("dur_ns") > _MAX_NS)
        )
        & pl.col("has_dur")
        & pl.col("cat").is_not_null(),
        PROBLEMS["negative_dur"]: pl.col("dur_ns") < 0,
    }
    counts = x.select(**{k: v.sum() for k, v in checks.items()}).row(0, named=True)
    for k, n in counts.items():
        if n:
            problems[k] = problems.get(k, 0) + int(n)
    keep = (
        pl.col("has_dur")
        & pl.col("cat").is_not_null()
        & (pl.col("cat") != "Trace")
        & pl.col("ts_ns").is_not_null()
        & (pl.col("ts_ns").abs() <= _MAX_NS)
        & (pl.col("dur_ns") >= 0)
        & (pl.col("dur_ns") <= _MAX_NS)
    )
    x = x.filter(keep)
    ts_float = bool(x["ts_float"].any()) if x.height else False
    known = pl.col("cat").is_in(list(KIND_OF_CAT))
    unknown = x.filter(~known)
    if unknown.height:
        key = unknown_categories(list(set(unknown["cat"].unique().to_list())))
        problems[key] = problems.get(key, 0) + unknown.height

    # Kind, category and step number per distinct (cat, name): names repeat a lot, so the
    # regexes run over a few thousand strings, not every row.
    x = x.with_columns(pl.col("name").fill_null(""))
    pairs = x.select("cat", "name").unique()
    pname = pl.col("name")
    p_step = pname.str.extract(STEP_RE, 1).cast(pl.Int64, strict=False)
    p_kind0 = pl.col("cat").replace_strict(KIND_OF_CAT, default="region", return_dtype=pl.String)
    p_kind = (
        pl.when(p_step.is_not_null() & (p_kind0 == "region"))
        .then(pl.lit("step"))
        .otherwise(p_kind0)
    )
    pairs = pairs.with_columns(_kind=p_kind, _step=p_step).with_columns(
        _category=pl.when(pl.col("_kind").is_in(GPU_KINDS))
        .then(gpu_category(pname))
        .when(pl.col("_kind") == "marker")
        .then(pl.lit("other"))
        .otherwise(pl.lit("host"))
    )
    x = x.join(pairs, on=["cat", "name"], how="left", maintain_order="left")
    name = pl.col("name")
    step_n = pl.col("_step")
    kind = pl.col("_kind")
    is_gpu = kind.is_in(GPU_KINDS)
    pid_i = pl.col("pid")
    tid_i = pl.col("tid")
    device = pl.coalesce(pl.col("a:device"), pid_i)
    start = pl.lit(base_ns, pl.Int64) + pl.col("ts_ns")
    detail = pl.concat_str(
        pl.lit("cat="),
        clean(pl.col("cat")),
        pl.when(pl.col("ext").is_not_null())
        .then(pl.lit(";ext=") + pl.col("ext").cast(pl.String))
        .otherwise(pl.lit("")),
        pl.when(pl.col("a:cuda_sync_kind").is_not_null())
        .then(pl.lit(";sync_kind=") + clean(pl.col("a:cuda_sync_kind")))
        .otherwise(pl.lit("")),
    )
    events = x.select(
        rank=pl.lit(rank, pl.Int32),
        pid=pid_i.clip(-(2**31), 2**31 - 1).fill_null(0),
        kind=kind,
        category=pl.col("_category"),
        name=name,
        start_ns=start,
        end_ns=start + pl.col("dur_ns"),
        lane=pl.when(is_gpu)
        .then(pl.coalesce(pl.col("stream"), tid_i))
        .otherwise(tid_i)
        .clip(-(2**31), 2**31 - 1)
        .fill_null(0),
        device=pl.when(is_gpu | (kind == "marker"))
        .then(device.clip(-1, 2**15 - 1))
        .otherwise(pl.lit(-1))
        .fill_null(-1),
        correlation=pl.when(kind == "step")
        .then(step_n)
        .when(kind.is_in([*GPU_KINDS, "runtime"]))
        .then(pl.col("corr").fill_null(0))
        .otherwise(pl.lit(0)),
        bytes=pl.when(kind.is_in(["memcpy", "memset"]))
        .then(pl.col("a:bytes").clip(lower_bound=0).fill_null(0))
        .otherwise(pl.lit(0)),
        value=pl.lit(None, pl.Float64),
        detail=detail,
        _i=pl.col("_i"),  # position in the file: a deterministic tie-break
        # NCCL metadata of record_param_comms, for collectives (dropped by the caller).
        _coll=pl.col("a:Collective name"),
        _group_size=pl.col("a:Group size"),
        _in_nelems=pl.col("a:In msg nelems"),
        _out_nelems=pl.col("a:Out msg nelems"),
        _dtype=pl.col("a:dtype"),
        _pg=pl.col("a:Process Group Name"),
        _pg_desc=pl.col("a:Process Group Description"),
        _pg_ranks=pl.col("a:Process Group Ranks"),
    )
    return events, ts_float
