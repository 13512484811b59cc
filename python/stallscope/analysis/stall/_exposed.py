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

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope import _core
from stallscope._schema import detail_value
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
    besides the sequence number: the group, and for kind collective the operation's name (a
    null name is an operation of its own; p2p rows count as the name "", as there). Details
    are parsed once per distinct value."""
    if comm is None or comm.height == 0:
        return pl.DataFrame(schema=ARRIVALS_SCHEMA)
    rows = comm.filter(pl.col("kind").is_in(("collective", "p2p")))
    if rows.height == 0:
        return pl.DataFrame(schema=ARRIVALS_SCHEMA)
    distinct = rows["detail"].unique(maintain_order=True).to_list()
    facts = pl.DataFrame(
        {
            "detail": distinct,
            "_group": [detail_value(d, "group") for d in distinct],
            "_size": [detail_value(d, "group_size") for d in distinct],
        },
        schema={"detail": pl.String, "_group": pl.String, "_size": pl.String},
    )
    name = pl.col("name")
    op = (
        pl.when(pl.col("kind") == "collective")
        .then(pl.when(name.is_null()).then(pl.lit("n")).otherwise(pl.lit("c") + name))
        .otherwise(pl.lit("c"))
    )
    return (
        rows.join(facts, on="detail", how="left", nulls_equal=True, maintain_order="left")
        .select(
            "rank",
            key=pl.concat_str(pl.col("_group"), pl.lit("\x1f"), op),
            seq="correlation",
            start_ns="start_ns",
            end_ns="end_ns",
            group_size=pl.col("_size").cast(pl.Int32, strict=False),
        )
        .filter(pl.col("key").is_not_null())
        .cast(ARRIVALS_SCHEMA)  # type: ignore[arg-type]
    )


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


Waits = tuple[Array, Array, Array]  # rank (int32), start_ns, end_ns


def wait_arrays(arrivals: pl.DataFrame) -> Waits:
    """`waits` as arrays: the instances numbered from the keys' codes and one sort."""
    from stallscope.analysis._collective_columns import _dense, _order

    none = np.zeros(0, np.int64)
    if arrivals.height == 0:
        return none.astype(np.int32), none, none
    key = _core.string_codes(arrivals["key"])[0].astype(np.int64)
    seq_s = arrivals["seq"]
    seq_null = seq_s.is_null().to_numpy() if seq_s.null_count() else np.zeros(seq_s.len(), bool)
    seq, seq_b = _dense(_arrow.int_values(seq_s, np.int64, 0))
    start = arrivals["start_ns"].to_numpy()
    end = arrivals["end_ns"].to_numpy()
    keys = [(key, int(key.max()) + 1), ((~seq_null).astype(np.int64), 2), (seq, seq_b)]
    cells = keys[0][1] * 2 * seq_b
    if cells <= 4 * start.size:  # sequence numbers dense per key: one table, no sort
        cell = (key * 2 + ~seq_null) * seq_b + seq
        top = np.full(cells, np.iinfo(np.int64).min)
        np.maximum.at(top, cell, start)
        last = top[cell]
    else:
        order = _order(keys)
        if order is None:
            w = waits(arrivals)
            return w["rank"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        heads = np.zeros(order.size, bool)
        heads[0] = True
        for k, _ in keys:
            ks = k[order]
            heads[1:] |= ks[1:] != ks[:-1]
        at = np.flatnonzero(heads)
        inst = np.empty(order.size, np.int64)
        inst[order] = np.cumsum(heads) - 1
        last = np.maximum.reduceat(start[order], at)[inst]
    wait_end = np.maximum(np.minimum(last, end), start)
    keep = wait_end > start
    rank = arrivals["rank"].to_numpy()[keep].astype(np.int32)
    return rank, start[keep], wait_end[keep]


def check_timeline(ranks: list[Array], starts: list[Array], ends: list[Array]) -> None:
    """split_sync_wait's condition: every rank's times laid end to end fit one int64
    timeline (ValueError naming the problem otherwise)."""
    lo = min(int(a.min()) for a in starts if a.size)
    hi = max(int(a.max()) for a in ends if a.size)
    span = hi - lo + 1
    top = max(int(r.max()) for r in ranks if r.size)
    if min(int(r.min()) for r in ranks if r.size) < 0 or (top + 1) * span >= 2**62:
        raise ValueError(
            f"ranks up to {top} over {span} ns do not fit one int64 timeline; ranks must be "
            "non-negative and the run shorter than 2**62 / ranks ns"
        )


def moved(table: pl.DataFrame, x: tuple[Array, Array, Array, Array], w: Waits) -> pl.DataFrame:
    """`table` with the exposed communication `x` (rank, start, end, network) inside the
    waits `w` moved to sync_wait_ns (csrc/analysis/sync_split.cc)."""
    net, icx = _core.sync_split(
        table["rank"].to_numpy(),
        table["start_ns"].to_numpy(),
        table["end_ns"].to_numpy(),
        x[0],
        x[1],
        x[2],
        x[3].view(np.uint8),
        *w,
    )
    return table.with_columns(
        sync_wait_ns=table["sync_wait_ns"] + _arrow.series(net + icx),
        network_ns=table["network_ns"] - _arrow.series(net),
        interconnect_ns=table["interconnect_ns"] - _arrow.series(icx),
    )


def split_sync_wait(
    table: pl.DataFrame, exposed: pl.DataFrame, arrivals: pl.DataFrame
) -> pl.DataFrame:
    """`table` (local rows of any ranks) with sync wait split off: per row, the exposed
    communication inside the rank's waits (from `arrivals` of every rank, matched across
    ranks) moves from network_ns / interconnect_ns to sync_wait_ns (the module docstring).
    Times must be on one clock. In one C++ pass per rank (`moved`); `split_sync_wait_numpy`
    is the reference."""
    x = tuple(exposed[c].to_numpy() for c in ("rank", "start_ns", "end_ns", "network"))
    return split_parts([table], [(x[0], x[1], x[2], x[3])], arrivals)[0]


def split_parts(
    tables: list[pl.DataFrame],
    exposed: list[tuple[Array, Array, Array, Array]],
    arrivals: pl.DataFrame,
    mapper: Callable[..., Iterable[pl.DataFrame]] = map,
) -> list[pl.DataFrame]:
    """`split_sync_wait` of parts of a run (each table with its exposed communication as
    arrays: rank, start, end, network) against the arrivals of every rank: the waits are
    found once, then each part is moved alone (`mapper`: e.g. a thread pool's map)."""
    if not (arrivals.height and any(x[0].size for x in exposed) and any(t.height for t in tables)):
        return tables
    w = wait_arrays(arrivals)
    if w[0].size == 0:
        return tables
    check_timeline(
        [*(x[0] for x in exposed), w[0], *(t["rank"].to_numpy() for t in tables)],
        [*(x[1] for x in exposed), *(t["start_ns"].to_numpy() for t in tables)],
        [*(x[2] for x in exposed), *(t["end_ns"].to_numpy() for t in tables)],
    )
    return list(mapper(lambda t, x: moved(t, x, w), tables, exposed))


def split_sync_wait_numpy(
    table: pl.DataFrame, exposed: pl.DataFrame, arrivals: pl.DataFrame
) -> pl.DataFrame:
    """split_sync_wait in NumPy on one timeline (the reference).

    How: ranks laid end to end on one timeline; the union of each rank's waits, cut at the
    boundaries of its steps; for each piece, the exposed time inside it from the cumulative
    length of the exposed intervals (sorted, disjoint: one binary search per piece end)."""
    if table.height == 0 or exposed.height == 0 or arrivals.height == 0:
        return table
    w = waits(arrivals)
    if w.height == 0:
        return table
    es, ee = exposed["start_ns"].to_numpy(), exposed["end_ns"].to_numpy()
    er = exposed["rank"].to_numpy().astype(np.int64)
    tr = table["rank"].to_numpy().astype(np.int64)
    ts, te = table["start_ns"].to_numpy(), table["end_ns"].to_numpy()
    wr = w["rank"].to_numpy().astype(np.int64)
    lo, hi = int(min(es.min(), ts.min())), int(max(ee.max(), te.max()))
    span = hi - lo + 1
    top = int(max(er.max(), wr.max(), tr.max()))
    if int(min(er.min(), wr.min(), tr.min())) < 0 or (top + 1) * span >= 2**62:
        raise ValueError(
            f"ranks up to {top} over {span} ns do not fit one int64 timeline; ranks must be "
            "non-negative and the run shorter than 2**62 / ranks ns"
        )

    def flat(rank: Array, t: Array) -> Array:  # exposed pieces and steps lie in [lo, hi]
        out: Array = rank * span
        out += t
        out -= lo
        return out

    wt = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
    ws, we = (flat(wr, np.clip(x, lo, hi)) for x in wt)
    real = we > ws
    wa, wb = Union(ws[real], we[real]).merged()
    # the steps on the timeline, sorted by start, then end (a rank's steps are disjoint but
    # for empty ones, which may share a start with the next: ends then sort too)
    ta, tb = flat(tr, ts), flat(tr, te)
    order = np.lexsort((tb, ta))
    row, pa, pb = _pieces(wa, wb, ta[order], tb[order])
    got = _covered(flat(er, es), flat(er, ee), exposed["network"].to_numpy(), pa, pb)
    moved_net = np.zeros(table.height, np.int64)
    moved_icx = np.zeros(table.height, np.int64)
    np.add.at(moved_net, order[row], got[0])
    np.add.at(moved_icx, order[row], got[1])
    return table.with_columns(
        sync_wait_ns=table["sync_wait_ns"] + _arrow.series(moved_net + moved_icx),
        network_ns=table["network_ns"] - _arrow.series(moved_net),
        interconnect_ns=table["interconnect_ns"] - _arrow.series(moved_icx),
    )


def _pieces(a: Array, b: Array, sa: Array, sb: Array) -> tuple[Array, Array, Array]:
    """The disjoint sorted intervals [a, b) cut by the disjoint sorted windows [sa, sb):
    (window index, start, end) of every non-empty piece inside a window."""
    i0 = np.searchsorted(sb, a, side="right")  # the first window ending after a
    i1 = np.searchsorted(sa, b, side="left")  # the first window starting at or after b
    n = np.maximum(i1 - i0, 0)
    src = np.repeat(np.arange(a.size), n)
    j = np.repeat(i0, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
    start = np.maximum(a[src], sa[j])
    end = np.minimum(b[src], sb[j])
    keep = end > start
    return j[keep], start[keep], end[keep]


def _covered(s: Array, e: Array, net: Array, a: Array, b: Array) -> tuple[Array, Array]:
    """Per interval [a, b): the length of the disjoint intervals [s, e) inside it, of those
    with `net` and of the others."""
    if s.size == 0:
        return np.zeros(a.size, np.int64), np.zeros(a.size, np.int64)
    if s.size > 1 and (s[1:] < s[:-1]).any():
        o = np.argsort(s, kind="stable")
        s, e, net = s[o], e[o], net[o]
    length = e - s
    cum_net = np.zeros(s.size + 1, np.int64)
    np.cumsum(np.where(net, length, 0), out=cum_net[1:])
    cum_all = np.zeros(s.size + 1, np.int64)
    np.cumsum(length, out=cum_all[1:])

    def upto(t: Array) -> tuple[Array, Array]:  # lengths of the intervals before t
        k = np.searchsorted(s, t, side="right")
        j = np.maximum(k - 1, 0)
        part = np.clip(t - s[j], 0, length[j])
        part[k == 0] = 0
        n = np.where(k == 0, 0, cum_net[j] + np.where(net[j], part, 0))
        every = np.where(k == 0, 0, cum_all[j] + part)
        return n, every - n

    hi_net, hi_icx = upto(b)
    lo_net, lo_icx = upto(a)
    return hi_net - lo_net, hi_icx - lo_icx
