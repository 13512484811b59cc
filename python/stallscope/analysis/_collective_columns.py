"""match_collectives and stragglers on the collective columns, in NumPy: no per-row Python,
no join or sort on strings.

Details, names and groups become integer codes once per distinct value (groups and names
numbered in their sorted order, so that sorting the codes sorts the strings); an instance is a
dense number of (group, operation, sequence number) from one sort of a combined int64 key; the
per-instance facts (last and first arrival, members) come from that order by reduceat. The
Polars implementations in _collectives.py are the reference (the tests hold the two equal);
they still take what this does not cover: a LazyFrame, a frame not in the event schema, null
ranks, keys whose ranges do not fit one int64.
"""

from __future__ import annotations

import weakref
from typing import Any, Final

import numpy as np
import polars as pl

from stallscope import _core
from stallscope._schema import KIND, KIND_ID, detail_value
from stallscope._utils import arrow as _arrow

Array = np.ndarray[Any, Any]

MATCHED_SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "name": pl.String(),
    "seq": pl.Int64(),
    "group": pl.String(),
    "group_size": pl.Int32(),
    "nnodes": pl.Int32(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "bytes": pl.Int64(),
    "kind": KIND,
    "last_arrival_ns": pl.Int64(),
    "members": pl.Int32(),
    "skew_ns": pl.Int64(),
    "sync_wait_ns": pl.Int64(),
    "transfer_ns": pl.Int64(),
    "complete": pl.Boolean(),
}
_NEEDED: Final = ("rank", "kind", "name", "correlation", "start_ns", "end_ns", "bytes", "detail")
_COLL, _P2P = KIND_ID["collective"], KIND_ID["p2p"]
_LIMIT: Final = 1 << 62  # combined keys stay below this


def _order(keys: list[tuple[Array, int]]) -> Array | None:
    """The order sorting the rows by `keys` (each: non-negative int64 values and their bound;
    the first key the primary), then by row: one sort of a combined int64 key (unique, so an
    unstable sort is stable). None when the bounds multiplied do not fit."""
    n = keys[0][0].size
    total = n
    for _, bound in keys:
        total *= max(bound, 1)
        if total >= _LIMIT:
            return None
    combined = np.zeros(n, np.int64)
    for k, bound in keys:
        combined *= max(bound, 1)
        combined += k
    combined *= max(n, 1)
    combined += np.arange(n, dtype=np.int64)
    out: Array = np.argsort(combined)
    return out


def _dense(v: Array) -> tuple[Array, int]:
    """Values as 0-based offsets from their minimum, and their bound."""
    if v.size == 0:
        return v.astype(np.int64), 1
    lo = int(v.min())
    return v.astype(np.int64) - lo, int(v.max()) - lo + 1


def _sorted_codes(s: pl.Series) -> tuple[Array, list[str]]:
    """Codes of a string column numbered in the sorted order of its distinct values (null:
    -1), and those values sorted."""
    codes, _, values = _core.string_codes(s)
    ranked = sorted(range(len(values)), key=values.__getitem__)
    to_sorted = np.empty(len(values), np.int64)
    to_sorted[ranked] = np.arange(len(values))
    out = to_sorted[codes]
    if s.null_count():
        out[s.is_null().to_numpy()] = -1
    return out, [values[i] for i in ranked]


class _Keys:
    """A collective / p2p frame's matching keys as codes (see the module docstring)."""

    def __init__(self, comm: pl.DataFrame) -> None:
        dcodes, _, details = _core.string_codes(comm["detail"])  # null reads as "": no keys
        groups = [detail_value(d, "group") for d in details]
        names = sorted({g for g in groups if g is not None})
        at = {g: i for i, g in enumerate(names)}
        self.groups = names
        self.group = np.array([-1 if g is None else at[g] for g in groups], np.int64)[dcodes]

        def ints(key: str) -> pl.Series:  # parse_detail's strict Int32 cast, per distinct value
            s = pl.Series([detail_value(d, key) for d in details], dtype=pl.String)
            return s.cast(pl.Int32).gather(_arrow.series(dcodes.astype(np.int64)))

        self.group_size = ints("group_size")
        self.nnodes = ints("nnodes")
        self.kind = _arrow.enum_codes(comm["kind"])
        self.name, self.names = _sorted_codes(comm["name"])
        # the operation: the name for collectives (null: its own), "" for p2p
        empty = self.names.index("") if "" in self.names else len(self.names)
        self.op = np.where(self.kind == _COLL, self.name + 1, empty + 1)
        seq = comm["correlation"]
        self.seq_null = seq.is_null().to_numpy() if seq.null_count() else np.zeros(seq.len(), bool)
        self.seq = _arrow.int_values(seq, np.int64, 0)


def match_columns(events: pl.DataFrame) -> tuple[pl.DataFrame, Array] | None:
    """match_collectives(events) and each row's instance (dense, by the sorted keys); None
    where this does not apply (the module docstring)."""
    if not all(c in events.schema for c in _NEEDED) or events.schema["kind"] != KIND:
        return None
    kind = _arrow.enum_codes(events["kind"])
    mask = (kind == _COLL) | (kind == _P2P)
    comm = events.select(_NEEDED).filter(_arrow.series(mask))
    if comm.height == 0 or comm["rank"].null_count():
        return None
    k = _Keys(comm)
    keep = np.flatnonzero(k.group >= 0)
    rank = comm["rank"].to_numpy()[keep]
    group, op, seq_null = k.group[keep], k.op[keep], k.seq_null[keep]
    seq, seq_b = _dense(k.seq[keep])
    rank_d, rank_b = _dense(rank)
    # by instance, then rank: the instances' facts
    inst_keys = [
        (group, len(k.groups)),
        (op, len(k.names) + 2),
        ((~seq_null).astype(np.int64), 2),
        (seq, seq_b),
    ]
    by_inst = _order([*inst_keys, (rank_d, rank_b)])
    if by_inst is None:
        return None
    start = comm["start_ns"].to_numpy()[keep]
    end = comm["end_ns"].to_numpy()[keep]
    n = keep.size
    heads = np.zeros(n, bool)
    if n:
        heads[0] = True
        for key, _ in inst_keys:
            ks = key[by_inst]
            heads[1:] |= ks[1:] != ks[:-1]
    inst = np.empty(n, np.int64)
    inst[by_inst] = np.cumsum(heads) - 1
    at = np.flatnonzero(heads)
    s_sorted = start[by_inst]
    last = np.maximum.reduceat(s_sorted, at) if n else s_sorted
    first = np.minimum.reduceat(s_sorted, at) if n else s_sorted
    r_sorted = rank[by_inst]
    new_rank = heads.copy()
    if n:
        new_rank[1:] |= r_sorted[1:] != r_sorted[:-1]
    members = np.add.reduceat(new_rank.astype(np.int64), at) if n else new_rank.astype(np.int64)
    last_i, first_i, members_i = last[inst], first[inst], members[inst]
    wait = np.maximum(np.minimum(last_i, end) - start, 0)
    transfer = np.maximum(end - start - wait, 0)
    # the output's order: group, seq, name (nulls first), rank
    name = k.name[keep]
    out_order = _order(
        [
            (group, len(k.groups)),
            ((~seq_null).astype(np.int64), 2),
            (seq, seq_b),
            (name + 1, len(k.names) + 1),
            (rank_d, rank_b),
        ]
    )
    if out_order is None:
        return None
    o = keep[out_order]
    size = k.group_size.gather(_arrow.series(o))
    size_v = _arrow.int_values(size, np.int64, 0)
    members_o = members_i[out_order]
    complete = size.is_null().to_numpy() | (members_o >= size_v)
    cols = [
        _arrow.series(rank[out_order], "rank", pl.Int32),
        _arrow.strings(k.names, name[out_order], "name"),
        comm["correlation"].gather(_arrow.series(o)).alias("seq"),
        _arrow.strings(k.groups, group[out_order], "group"),
        size.alias("group_size"),
        k.nnodes.gather(_arrow.series(o)).alias("nnodes"),
        _arrow.series(start[out_order], "start_ns", pl.Int64),
        _arrow.series(end[out_order], "end_ns", pl.Int64),
        comm["bytes"].gather(_arrow.series(o)).alias("bytes"),
        _arrow.enum(k.kind[o], KIND.categories.to_list(), KIND, "kind"),
        _arrow.series(last_i[out_order], "last_arrival_ns", pl.Int64),
        _arrow.series(members_o, "members", pl.Int32),
        _arrow.series((last_i - first_i)[out_order], "skew_ns", pl.Int64),
        _arrow.series(wait[out_order], "sync_wait_ns", pl.Int64),
        _arrow.series(transfer[out_order], "transfer_ns", pl.Int64),
        _arrow.series(complete, "complete", pl.Boolean),
    ]
    out = _arrow.frame_of(cols)
    instance = inst[out_order]
    _INSTANCES[id(out)] = (weakref.ref(out), instance)
    weakref.finalize(out, _INSTANCES.pop, id(out), None)
    return out, instance


# id of a frame match_columns made -> (the frame, each row's instance): stragglers' keys
_INSTANCES: dict[int, tuple[weakref.ref[pl.DataFrame], Array]] = {}


def _instances_of(matched: pl.DataFrame) -> Array | None:
    """The instance of each row of a frame `match_columns` made (None for any other)."""
    hit = _INSTANCES.get(id(matched))
    if hit is None or hit[0]() is not matched:
        return None
    return hit[1]


STRAGGLERS_SCHEMA: Final[dict[str, pl.DataType]] = {
    "step": pl.Int64(),
    "rank": pl.Int32(),
    "collectives": pl.UInt32(),
    "late_ns": pl.Int64(),
    "last_arrivals": pl.UInt32(),
    "caused_wait_ns": pl.Int64(),
    "straggler": pl.Boolean(),
}


def _steps(rank: Array, t: Array, win: Any) -> tuple[Array, Array] | None:
    """The step of the window holding each (rank, t): the last window of the rank starting at
    or before t, when t is before its end (assign_steps); (step, null mask). None when the
    ranks' timelines do not fit one int64."""
    n = rank.size
    ranks = np.unique(win.rank)
    w_ri = np.searchsorted(ranks, win.rank)
    lo = int(min(win.start.min(), win.end.min())) - 1
    hi = int(max(win.start.max(), win.end.max())) + 1
    span = hi - lo + 1
    if (ranks.size + 1) * span >= _LIMIT:
        return None
    wkey = w_ri.astype(np.int64) * span + (win.start - lo)
    ri = np.searchsorted(ranks, rank)
    ok = ri < ranks.size
    ok[ok] = ranks[ri[ok]] == rank[ok]
    key = ri.astype(np.int64) * span + (np.clip(t, lo, hi) - lo)
    j = np.searchsorted(wkey, key, side="right") - 1
    jj = np.maximum(j, 0)
    hit = ok & (j >= 0) & (w_ri[jj] == ri) & (t < win.end[jj])
    if win.step_null is not None:
        hit &= ~win.step_null[jj]
    step = np.where(hit, win.step[jj] if n else 0, 0).astype(np.int64)
    return step, ~hit


def stragglers_columns(events: pl.DataFrame, matched: pl.DataFrame) -> pl.DataFrame | None:
    """stragglers(events, matched) when `matched` is match_columns' frame; None otherwise or
    where this does not apply (the module docstring)."""
    from stallscope.analysis._steps import window_arrays

    inst = _instances_of(matched)
    if inst is None or matched.height == 0:
        return None
    win = window_arrays(events)
    rank = matched["rank"].to_numpy()
    start = matched["start_ns"].to_numpy()
    if len(win.rank) == 0:  # no step markers: the whole run is one step, 0
        step, null = np.zeros(rank.size, np.int64), np.zeros(rank.size, bool)
    else:
        got = _steps(rank, start, win)
        if got is None:
            return None
        step, null = got
    # each instance in the earliest step any member assigns it to
    n_inst = int(inst.max()) + 1
    big = np.iinfo(np.int64).max
    inst_step = np.full(n_inst, big)
    np.minimum.at(inst_step, inst[~null], step[~null])
    row_step = inst_step[inst]
    keep = row_step != big
    first = np.full(n_inst, big)
    np.minimum.at(first, inst, start)
    wait = matched["sync_wait_ns"].to_numpy()
    total_wait = np.zeros(n_inst, np.int64)
    np.add.at(total_wait, inst, wait)
    others = total_wait[inst] - wait
    last_rank = start == matched["last_arrival_ns"].to_numpy()
    waited = others > 0
    is_last = last_rank & waited & (matched["members"].to_numpy() > 1)
    caused = np.where(last_rank & waited, others, 0)
    late = start - first[inst]
    st, rk = row_step[keep], rank[keep]
    st_d, st_b = _dense(st)
    rk_d, rk_b = _dense(rk)
    order = _order([(st_d, st_b), (rk_d, rk_b)])
    if order is None:
        return None
    st, rk = st[order], rk[order]
    m = st.size
    heads = np.zeros(m, bool)
    if m:
        heads[0] = True
        heads[1:] = (st[1:] != st[:-1]) | (rk[1:] != rk[:-1])
    at = np.flatnonzero(heads)

    def total(v: Array) -> Array:
        out: Array = np.add.reduceat(v[keep][order].astype(np.int64), at) if m else v[:0]
        return out

    count = np.diff(np.append(at, m))
    caused_g = total(caused)
    g_step = st[at]
    step_heads = np.flatnonzero(np.concatenate(([True], g_step[1:] != g_step[:-1])))
    top = np.maximum.reduceat(caused_g, step_heads) if at.size else caused_g
    top_g = np.repeat(top, np.diff(np.append(step_heads, at.size)))
    return _arrow.frame_of(
        [
            _arrow.series(g_step, "step", pl.Int64),
            _arrow.series(rk[at], "rank", pl.Int32),
            _arrow.series(count, "collectives", pl.UInt32),
            _arrow.series(total(late), "late_ns", pl.Int64),
            _arrow.series(total(is_last), "last_arrivals", pl.UInt32),
            _arrow.series(caused_g, "caused_wait_ns", pl.Int64),
            _arrow.series((caused_g == top_g) & (top_g > 0), "straggler", pl.Boolean),
        ]
    )
