"""Collectives matched across ranks.

Contract for every source of collective events (the torch.distributed instrumentation, the NCCL
profiler plugin, imported traces with NCCL metadata): kind ``collective`` or ``p2p``, category
``comm``, name = the operation (all_reduce, all_gather, ..., or NCCL's AllReduce ...),
correlation = the sequence number of the operation within its group (equal on every member
rank), bytes = the rank's payload, and detail keys:

- ``group``: an id of the group/communicator, equal on every member (e.g. NCCL's commHash or
  torch's process group name plus its ranks);
- ``group_size``: number of ranks in the group;
- ``nnodes``: number of nodes the group spans (1 = within a node: interconnect; more: network).

start_ns is when the rank entered the collective (arrived), end_ns when its transfer ended.

Instances are matched across ranks by (group, seq) and, for kind ``collective``, the name too:
NCCL numbers collectives per communicator and operation type (AllReduce #3 and AllGather #3 are
different operations), torch per group. Point-to-point events match by (group, seq) only: the
sender's ``send`` and the receiver's ``recv`` are one transfer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from stallscope._schema import KIND, KIND_ID, detail_value, parse_detail
from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope._utils.sorted import segment_starts

Array = np.ndarray[Any, Any]


def collectives(events: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """The collective / p2p events with their detail keys as columns: rank, name, seq, group,
    group_size, nnodes, start_ns, end_ns, bytes."""
    c = events.lazy().filter(pl.col("kind").is_in(["collective", "p2p"]))
    # Details repeat (one per group and size): each distinct one is parsed once, joined back.
    keys = (
        c.select(pl.col("detail").unique())
        .drop_nulls()
        .with_columns(
            parse_detail(pl.col("detail"), "group").alias("group"),
            parse_detail(pl.col("detail"), "group_size", pl.Int32()).alias("group_size"),
            parse_detail(pl.col("detail"), "nnodes", pl.Int32()).alias("nnodes"),
        )
    )
    return c.join(keys, on="detail", how="left", maintain_order="left").select(
        "rank",
        "name",
        pl.col("correlation").alias("seq"),
        "group",
        "group_size",
        "nnodes",
        "start_ns",
        "end_ns",
        "bytes",
        "kind",
    )


@dataclass
class Instances:
    """The matching keys of collective / p2p rows, as arrays in row order: ``instance``: the
    row's instance (equal exactly within one (group, op_key, seq), op_key being the name for
    kind collective and "" for p2p, see the module docstring; -1 where the group is unknown:
    such a row matches nothing); ``nnodes`` (null: 1)."""

    instance: Array
    nnodes: Array


COLUMNAR_ROWS = 20_000
"""From this many rows `instances` works on whole columns (Polars, NumPy); below, per row in
Python (a stall table with a few hundred collectives would spend more on a Polars query plan
than on the rows). Both give the same keys; the tests run both."""


def instances(comm: pl.DataFrame) -> Instances:
    """The instance keys of `comm`'s rows (kind, name, correlation, detail). Details are parsed
    once per distinct value (`detail_value`)."""
    if comm.height >= COLUMNAR_ROWS:
        return _instances_columnar(comm)
    n = comm.height
    details = comm["detail"].to_list()
    parsed: dict[str | None, tuple[int, int]] = {}  # detail -> (group code or -1, nnodes)
    groups: dict[str, int] = {}
    nnodes_text: list[str | None] = []
    for d in dict.fromkeys(details):
        g = detail_value(d, "group")
        parsed[d] = (-1 if g is None else groups.setdefault(g, len(groups)), len(nnodes_text))
        nnodes_text.append(detail_value(d, "nnodes"))
    # parse_detail's cast (strict: a value that is no Int32 raises as it does there); none to
    # cast in imported traces (Kineto says nothing of nodes).
    cast: list[int | None] = [None] * len(nnodes_text)
    if any(v is not None for v in nnodes_text):
        cast = pl.Series(nnodes_text, dtype=pl.String).cast(pl.Int32).to_list()
    nn = np.array([1 if v is None else v for v in cast], dtype=np.int64)
    at = np.array([parsed[d] for d in details], dtype=np.int64).reshape(n, 2)
    group, nnodes = at[:, 0], nn[at[:, 1]]
    # op_key: the name for kind collective, "" for p2p (a null name is a value of its own).
    kind = comm["kind"]
    if kind.dtype == KIND:  # the schema's Enum: its codes, no string column
        is_coll = (_arrow.enum_codes(kind) == KIND_ID["collective"]).tolist()
    else:
        is_coll = (kind.cast(pl.String) == "collective").to_list()
    ops: dict[str | None, int] = {}
    op = np.array(
        [
            ops.setdefault(nm if c else "", len(ops))
            for nm, c in zip(comm["name"].to_list(), is_coll, strict=True)
        ],
        dtype=np.int64,
    )
    seq = comm["correlation"]
    seq_null = seq.is_null().to_numpy() if seq.null_count() else np.zeros(n, bool)
    seq_v = _arrow.int_values(seq, np.int64, 0)
    order = np.lexsort((seq_v, seq_null, op, group))
    inst = np.empty(n, np.int64)
    inst[order] = np.cumsum(segment_starts(*(k[order] for k in (group, op, seq_null, seq_v)))) - 1
    return Instances(instance=np.where(group >= 0, inst, -1), nnodes=nnodes)


def _instances_columnar(comm: pl.DataFrame) -> Instances:
    """`instances` on whole columns: the details' facts joined back from their distinct
    values; the instance a dense number of (group, op key, seq) from one sort."""
    distinct = comm["detail"].unique(maintain_order=True)
    groups: dict[str, int] = {}
    codes: list[int] = []
    nnodes_text: list[str | None] = []
    for d in distinct.to_list():
        g = detail_value(d, "group")
        codes.append(-1 if g is None else groups.setdefault(g, len(groups)))
        nnodes_text.append(detail_value(d, "nnodes"))
    facts = pl.DataFrame(
        {
            "detail": distinct,
            "_g": pl.Series(codes, dtype=pl.Int64),
            # parse_detail's cast: a value that is no Int32 raises as it does there
            "_nn": pl.Series(nnodes_text, dtype=pl.String).cast(pl.Int32),
        }
    )
    is_coll = pl.col("kind") == "collective"
    op = pl.when(is_coll).then(pl.col("name")).otherwise(pl.lit(""))
    keyed = (
        comm.select("detail", "correlation", _op=op)
        .join(facts, on="detail", how="left", nulls_equal=True, maintain_order="left")
        .select(
            "_g",
            pl.col("_nn").fill_null(1),
            # a null name is an operation of its own: the code after every other
            _op=pl.col("_op").cast(pl.Categorical).to_physical().cast(pl.Int64).fill_null(-1),
            _sn=pl.col("correlation").is_null(),
            _seq=pl.col("correlation").fill_null(0),
        )
    )
    group = keyed["_g"].to_numpy()
    op_code = keyed["_op"].to_numpy()
    seq_null = keyed["_sn"].to_numpy()
    seq = keyed["_seq"].to_numpy()
    order = np.lexsort((seq, seq_null, op_code, group))
    inst = np.empty(comm.height, np.int64)
    heads = segment_starts(*(k[order] for k in (group, op_code, seq_null, seq)))
    inst[order] = np.cumsum(heads) - 1
    nnodes = keyed["_nn"].to_numpy().astype(np.int64)
    return Instances(instance=np.where(group >= 0, inst, -1), nnodes=nnodes)


@fair_gil
def match_collectives(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank and collective instance, matched across ranks by (group, seq) (and
    name for collectives, see the module docstring):
    rank, group, seq, name, start_ns, end_ns, bytes, nnodes, members (ranks seen),
    group_size, last_arrival_ns (max start over members), skew_ns (last minus first arrival),
    sync_wait_ns (this rank's time before the last member arrived, clipped to its interval),
    transfer_ns (the rest), complete (every member of the group was seen).

    Times must be on one clock (load() aligns them when the run measured offsets). A
    DataFrame in the event schema is matched on its columns in NumPy (_collective_columns.py);
    the Polars query here is the reference, and takes the rest."""
    if isinstance(events, pl.DataFrame):
        from stallscope.analysis._collective_columns import match_columns

        got = match_columns(events)
        if got is not None:
            return got[0]
    comm = events.lazy().filter(pl.col("kind").is_in(["collective", "p2p"])).collect()
    inst = pl.Series("_inst", instances(comm).instance)
    c = collectives(comm).with_columns(pl.lit(inst)).filter(pl.col("_inst") >= 0)
    per = pl.col("start_ns")
    grouped = c.with_columns(
        last_arrival_ns=per.max().over("_inst"),
        first_arrival_ns=per.min().over("_inst"),
        members=pl.col("rank").n_unique().over("_inst").cast(pl.Int32),
    )
    wait_end = pl.min_horizontal(pl.col("last_arrival_ns"), pl.col("end_ns"))
    return (
        grouped.with_columns(
            skew_ns=pl.col("last_arrival_ns") - pl.col("first_arrival_ns"),
            sync_wait_ns=(wait_end - pl.col("start_ns")).clip(lower_bound=0),
        )
        .with_columns(
            transfer_ns=(pl.col("end_ns") - pl.col("start_ns") - pl.col("sync_wait_ns")).clip(
                lower_bound=0
            ),
            complete=pl.col("group_size").is_null() | (pl.col("members") >= pl.col("group_size")),
        )
        .drop("first_arrival_ns", "_inst")
        .sort("group", "seq", "name", "rank")
        .collect()
    )


@fair_gil
def stragglers(
    events: pl.DataFrame | pl.LazyFrame, matched: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Which ranks held the others back, per step: one row per step and rank with
    collectives (matched instances of that step), late_ns (sum over them of how long after the
    first member this rank arrived), last_arrivals (how often it arrived last, when the others
    had to wait), caused_wait_ns (the other members' sync wait in the instances where this rank
    arrived last) and straggler (this rank caused the most wait in the step, and some).

    A collective instance belongs to the earliest step any member assigns it to (step markers
    per rank; see analysis.step_windows). Times must be on one clock (load() aligns them).
    `matched`: match_collectives(events), when the caller has it already (it is not computed
    again)."""
    from stallscope.analysis._collective_columns import stragglers_columns
    from stallscope.analysis._steps import assign_steps, step_windows

    if isinstance(events, pl.DataFrame):  # on the columns where it applies: the same result
        matched = match_collectives(events) if matched is None else matched
        got = stragglers_columns(events, matched)
        if got is not None:
            return got
    ev = events.lazy()
    m = match_collectives(ev) if matched is None else matched
    schema = {
        "step": pl.Int64,
        "rank": pl.Int32,
        "collectives": pl.UInt32,
        "late_ns": pl.Int64,
        "last_arrivals": pl.UInt32,
        "caused_wait_ns": pl.Int64,
        "straggler": pl.Boolean,
    }
    if m.is_empty():
        return pl.DataFrame(schema=schema)
    key = ["group", "seq", "name_key"]
    m = m.with_columns(
        name_key=pl.when(pl.col("kind") == "collective").then(pl.col("name")).otherwise(pl.lit(""))
    )
    windows = step_windows(ev)
    if windows.is_empty():  # no step markers: the whole run is one step, 0
        m = m.with_columns(step=pl.lit(0, pl.Int64))
    else:
        m = assign_steps(m.lazy(), windows).collect().with_columns(pl.col("step").cast(pl.Int64))
    m = m.with_columns(step=pl.col("step").min().over(key)).filter(pl.col("step").is_not_null())
    first = pl.col("start_ns").min().over(key)
    last_rank = pl.col("start_ns") == pl.col("last_arrival_ns")
    others_wait = pl.col("sync_wait_ns").sum().over(key) - pl.col("sync_wait_ns")
    waited = others_wait > 0
    per = m.with_columns(
        late_ns=pl.col("start_ns") - first,
        is_last=last_rank & waited & (pl.col("members") > 1),
        caused=pl.when(last_rank & waited).then(others_wait).otherwise(0),
    )
    out = per.group_by("step", "rank").agg(
        collectives=pl.len(),
        late_ns=pl.col("late_ns").sum(),
        last_arrivals=pl.col("is_last").sum(),
        caused_wait_ns=pl.col("caused").sum(),
    )
    top = pl.col("caused_wait_ns").max().over("step")
    return (
        out.with_columns(straggler=(pl.col("caused_wait_ns") == top) & (top > 0))
        .select(list(schema))
        .cast(schema)  # type: ignore[arg-type]
        .sort("step", "rank")
    )
