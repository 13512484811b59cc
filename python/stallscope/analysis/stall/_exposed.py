"""The stall table in two parts: what each rank knows alone, and the cross-rank part done from
the collectives' arrivals only.

Of a rank's row in the stall table, only the split of communication into sync wait and
transfer depends on other ranks (sync wait is the time before the last member of a collective
arrived). So the table can be computed as:

1. Per rank, from its own events (`local_parts`): the table with every collective taken as
   transfer (the ``local`` table: sync_wait_ns is 0, network_ns + interconnect_ns is the rank's
   exposed communication time); the intervals where communication is exposed (``exposed``: E,
   the comm segments not covered by compute or memcpy, each in one step, network or
   interconnect); and the rank's arrivals at its collectives (``arrivals``: instance key,
   sequence number, start, end).
2. Across ranks, on the arrivals alone (`split_sync_wait`): each instance's last arrival gives
   every member its wait W = [start, min(last arrival, end)); a rank's sync wait in a step is
   |E ∩ W|, taken from its network or interconnect time.

This equals stall_table exactly. Sync wait outranks network and interconnect and is outranked
by compute and memcpy, and W lies inside the rank's collectives: an instant of W that is not
compute or memcpy is in E, and there the full table says sync wait. An instant of E outside W
lies outside every collective's wait part, so the transfer intervals over it are the same in
both views: so is its label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope._schema import KIND, KIND_ID, detail_value
from stallscope._utils import arrow as _arrow
from stallscope.analysis.stall._intervals import Union
from stallscope.analysis.stall._sources import P
from stallscope.analysis.stall._table import (
    Prepared,
    Segments,
    category_sums,
    empty_table,
    prepare,
    segments,
    table_frame,
)

Array = np.ndarray[Any, Any]

EXPOSED_SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "step_start_ns": pl.Int64(),  # the start of the step (its row's start_ns)
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "network": pl.Boolean(),  # network, else interconnect
}
ARRIVALS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "key": pl.String(),  # the instance's group and operation (see _arrivals)
    "seq": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "group_size": pl.Int32(),
}


@dataclass
class LocalParts:
    """A rank's (or a batch of ranks') part of the stall table (the module docstring)."""

    table: pl.DataFrame  # stall_table's columns, every collective taken as transfer
    exposed: pl.DataFrame  # EXPOSED_SCHEMA
    arrivals: pl.DataFrame  # ARRIVALS_SCHEMA
    gpu: bool  # the events were taken as a GPU run
    multi: Array  # ranks with a collective that spans more than one node


def local_parts(
    events: pl.DataFrame | pl.LazyFrame, *, gpu: bool = False, multi: Array | None = None
) -> LocalParts:
    """The local table, exposed communication and arrivals of `events` (any ranks: each is
    computed alone). `gpu` / `multi`: as stall_table would take them for the whole run
    (a GPU run when any rank has GPU activity; ranks with a multi-node collective), when the
    events are a part of it; they are also found from the events themselves."""
    p = prepare(events, match=False, gpu=gpu, multi=multi)
    multi_out = p.multi if p.multi is not None else np.zeros(0, np.int32)
    if p.windows.height == 0:
        return LocalParts(
            empty_table(),
            pl.DataFrame(schema=EXPOSED_SCHEMA),
            _arrivals(p.comm),
            p.gpu,
            multi_out,
        )
    seg = segments(p)
    table = table_frame(p.windows.steps, category_sums(p, seg))
    return LocalParts(table, _exposed(p, seg), _arrivals(p.comm), p.gpu, multi_out)


def _exposed(p: Prepared, seg: Segments) -> pl.DataFrame:
    """The comm segments minus the compute union: E, in rank-local ns, with their step."""
    comm = (seg.label == P["network"]) | (seg.label == P["interconnect"])
    a, b, w = seg.start[comm], seg.end[comm], seg.w[comm]
    src, s, e = p.compute.complement_in(a, b)
    w = w[src]
    steps = p.windows.steps
    offset = p.windows.offset[w]
    return _arrow.frame(
        {
            "rank": steps.rank[w].astype(np.int32),
            "step_start_ns": steps.start[w],
            "start_ns": s - offset,
            "end_ns": e - offset,
            "network": seg.label[comm][src] == P["network"],
        }
    )


def _arrivals(comm: pl.DataFrame | None) -> pl.DataFrame:
    """The collective and p2p rows that can be matched (their detail names a group): rank,
    key, seq, start_ns, end_ns, group_size. The key is what match_collectives matches on
    besides the sequence number: the group, and for kind collective the operation's name."""
    if comm is None or comm.height == 0:
        return pl.DataFrame(schema=ARRIVALS_SCHEMA)
    kind = comm["kind"]
    codes = (
        _arrow.enum_codes(kind)
        if kind.dtype == KIND
        else np.array([KIND_ID.get(k, -1) for k in kind.cast(pl.String).to_list()])
    )
    keep = np.flatnonzero((codes == KIND_ID["collective"]) | (codes == KIND_ID["p2p"]))
    if keep.size == 0:
        return pl.DataFrame(schema=ARRIVALS_SCHEMA)
    rows = comm[_arrow.series(keep)]
    is_coll = codes[keep] == KIND_ID["collective"]
    details = rows["detail"].to_list()
    facts: dict[str | None, tuple[str | None, str | None]] = {
        d: (detail_value(d, "group"), detail_value(d, "group_size")) for d in dict.fromkeys(details)
    }
    keys: list[str | None] = []
    sizes: list[str | None] = []
    for d, name, coll in zip(details, rows["name"].to_list(), is_coll.tolist(), strict=True):
        group, size = facts[d]
        sizes.append(size)
        if group is None:
            keys.append(None)  # no group: matches nothing
        elif coll:  # a null name is an operation of its own
            keys.append(f"{group}\x1fc{name}" if name is not None else f"{group}\x1fn")
        else:
            keys.append(f"{group}\x1fp")
    out = pl.DataFrame(
        {
            "rank": rows["rank"],
            "key": pl.Series(keys, dtype=pl.String),
            "seq": rows["correlation"],
            "start_ns": rows["start_ns"],
            "end_ns": rows["end_ns"],
            "group_size": pl.Series(sizes, dtype=pl.String).cast(pl.Int32, strict=False),
        }
    )
    return out.filter(pl.col("key").is_not_null()).cast(ARRIVALS_SCHEMA)  # type: ignore[arg-type]


def waits(arrivals: pl.DataFrame) -> pl.DataFrame:
    """Each arrival's wait for the last member of its instance (rank, start_ns, end_ns), the
    waits that last only."""
    last = pl.col("start_ns").max().over("key", "seq")
    end = pl.min_horizontal(last, pl.col("end_ns"))
    return (
        arrivals.select(
            "rank",
            "start_ns",
            end_ns=pl.max_horizontal(end, pl.col("start_ns")),
        )
        .filter(pl.col("end_ns") > pl.col("start_ns"))
        .select(pl.col("rank").cast(pl.Int32), "start_ns", "end_ns")
    )


def split_sync_wait(
    table: pl.DataFrame, exposed: pl.DataFrame, arrivals: pl.DataFrame
) -> pl.DataFrame:
    """`table` (local rows of any ranks) with sync wait split off: per row, the exposed
    communication inside the rank's waits (from `arrivals` of every rank, matched across
    ranks) moves from network_ns / interconnect_ns to sync_wait_ns (the module docstring).
    Times must be on one clock."""
    if table.height == 0 or exposed.height == 0 or arrivals.height == 0:
        return table
    w = waits(arrivals)
    if w.height == 0:
        return table
    es, ee = exposed["start_ns"].to_numpy(), exposed["end_ns"].to_numpy()
    lo, hi = int(es.min()), int(ee.max())
    span = hi - lo + 1
    er = exposed["rank"].to_numpy().astype(np.int64)
    wr = w["rank"].to_numpy().astype(np.int64)
    top = int(max(er.max(), wr.max()))
    if int(min(er.min(), wr.min())) < 0 or (top + 1) * span >= 2**62:
        raise ValueError(
            f"ranks up to {top} over {span} ns do not fit one int64 timeline; ranks must be "
            "non-negative and the run shorter than 2**62 / ranks ns"
        )
    ws = np.clip(w["start_ns"].to_numpy(), lo, hi) + wr * span - lo
    we = np.clip(w["end_ns"].to_numpy(), lo, hi) + wr * span - lo
    real = we > ws
    u = Union(ws[real].copy(), we[real].copy())
    fs, fe = es + er * span - lo, ee + er * span - lo
    inside = u.before(fe) - u.before(fs)
    net = exposed["network"].to_numpy()
    moved = (
        pl.DataFrame(
            {
                "rank": exposed["rank"],
                "start_ns": exposed["step_start_ns"],
                "_net": np.where(net, inside, 0),
                "_icx": np.where(net, 0, inside),
            }
        )
        .group_by("rank", "start_ns")
        .agg(pl.col("_net", "_icx").sum())
    )
    out = table.join(moved, on=["rank", "start_ns"], how="left", maintain_order="left")
    net_ns, icx_ns = pl.col("_net").fill_null(0), pl.col("_icx").fill_null(0)
    return out.with_columns(
        sync_wait_ns=pl.col("sync_wait_ns") + net_ns + icx_ns,
        network_ns=pl.col("network_ns") - net_ns,
        interconnect_ns=pl.col("interconnect_ns") - icx_ns,
    ).select(table.columns)
