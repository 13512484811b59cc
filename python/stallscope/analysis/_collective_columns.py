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


def _combine(keys: list[tuple[Array, int]], rows: int = 0) -> Array | None:
    """The keys (each: non-negative int64 values and their bound; the first the primary) as
    one int64 per row, ordered as the keys are, times `rows`; None when the bounds multiplied
    (and `rows`) do not fit."""
    total = max(rows, 1)
    for _, bound in keys:
        total *= max(bound, 1)
        if total >= _LIMIT:
            return None
    combined = np.zeros(keys[0][0].size, np.int64)
    for k, bound in keys:
        combined *= max(bound, 1)
        combined += k
    if rows > 1:
        combined *= rows
    return combined


def _order(keys: list[tuple[Array, int]]) -> Array | None:
    """The order sorting the rows by `keys` (`_combine`), then by row: one sort of a combined
    int64 key (unique, so an unstable sort is stable). None when it does not fit."""
    n = keys[0][0].size
    combined = _combine(keys, max(n, 1))
    if combined is None:
        return None
    combined += np.arange(n, dtype=np.int64)
    out: Array = np.argsort(combined)
    return out


_NUMPY: Final = {pl.Int32: np.int32, pl.Int64: np.int64, pl.UInt32: np.uint32, pl.Boolean: bool}


def _col(values: Array, name: str, dtype: Any) -> pl.Series:
    """A column over the array's own memory (Polars shares a contiguous NumPy array; these
    are never written again): no copy of the millions of rows."""
    a = np.ascontiguousarray(values, dtype=_NUMPY[dtype])
    return pl.Series(name, a, dtype=dtype)


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

        by_code = pl.Series("", dcodes)  # uint32 codes: the gather positions, shared

        def ints(key: str) -> pl.Series:  # parse_detail's strict Int32 cast, per distinct value
            s = pl.Series([detail_value(d, key) for d in details], dtype=pl.String)
            return s.cast(pl.Int32).gather(by_code)

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
    whole = keep.size == comm.height  # every row has a group: no copies to take

    def rows(a: Array) -> Array:
        return a if whole else a[keep]

    rank = rows(comm["rank"].to_numpy())
    group, op, seq_null = rows(k.group), rows(k.op), rows(k.seq_null)
    seq, seq_b = _dense(rows(k.seq))
    rank_d, rank_b = _dense(rank)
    n = keep.size
    name = rows(k.name)
    nsq = (~seq_null).astype(np.int64)
    # the output's order: group, seq, name (nulls first), rank
    out_keys = [(group, len(k.groups)), (nsq, 2), (seq, seq_b), (name + 1, len(k.names) + 1)]
    single = not (rows(k.kind) == _P2P).any()  # collectives only: the operation is the name
    inst_keys = out_keys
    if not single:
        inst_keys = [(group, len(k.groups)), (op, len(k.names) + 2), (nsq, 2), (seq, seq_b)]
    # by instance, then rank: the instances' facts (and the output's order, when single)
    inst_key = _combine(inst_keys)
    bound = int(inst_key.max()) + 1 if inst_key is not None and n else 1
    sort_key = None if inst_key is None else _combine([(inst_key, bound), (rank_d, rank_b)], n)
    if inst_key is None or sort_key is None:
        return None
    sort_key += np.arange(n, dtype=np.int64)
    by_inst = np.argsort(sort_key)
    del sort_key
    start = rows(comm["start_ns"].to_numpy())
    end = rows(comm["end_ns"].to_numpy())
    ks = inst_key[by_inst]
    heads = np.empty(n, bool)
    if n:
        heads[0] = True
        np.not_equal(ks[1:], ks[:-1], out=heads[1:])
    del ks
    inst_sorted = np.cumsum(heads) - 1
    at = np.flatnonzero(heads)
    s_sorted = start[by_inst]
    last = np.maximum.reduceat(s_sorted, at) if n else s_sorted
    first = np.minimum.reduceat(s_sorted, at) if n else s_sorted
    r_sorted = rank[by_inst]
    new_rank = heads.copy()
    if n:
        new_rank[1:] |= r_sorted[1:] != r_sorted[:-1]
    members = np.add.reduceat(new_rank.astype(np.int64), at) if n else new_rank.astype(np.int64)
    if single:  # the rows in the instances' order are the output's
        out_order, inst_o = by_inst, inst_sorted
        start_o, end_o, rank_o = s_sorted, end[by_inst], r_sorted
    else:
        inst = np.empty(n, np.int64)
        inst[by_inst] = inst_sorted
        got = _order([*out_keys, (rank_d, rank_b)])
        if got is None:
            return None
        out_order = got
        inst_o = inst[out_order]
        start_o, end_o, rank_o = start[out_order], end[out_order], rank[out_order]
    last_o, first_o, members_o = last[inst_o], first[inst_o], members[inst_o]
    wait = np.maximum(np.minimum(last_o, end_o) - start_o, 0)
    transfer = np.maximum(end_o - start_o - wait, 0)
    o = out_order if whole else keep[out_order]
    at_o = pl.Series("", o.astype(np.uint32))  # gather positions, made once
    size = k.group_size.gather(at_o)
    size_v = _arrow.int_values(size, np.int64, 0)
    complete = size.is_null().to_numpy() | (members_o >= size_v)
    cols = [
        _col(rank_o, "rank", pl.Int32),
        _arrow.strings(k.names, name[out_order], "name"),
        comm["correlation"].gather(at_o).alias("seq"),
        _arrow.strings(k.groups, group[out_order], "group"),
        size.alias("group_size"),
        k.nnodes.gather(at_o).alias("nnodes"),
        _col(start_o, "start_ns", pl.Int64),
        _col(end_o, "end_ns", pl.Int64),
        comm["bytes"].gather(at_o).alias("bytes"),
        _arrow.enum(k.kind[o], KIND.categories.to_list(), KIND, "kind"),
        _col(last_o, "last_arrival_ns", pl.Int64),
        _col(members_o, "members", pl.Int32),
        _col(last_o - first_o, "skew_ns", pl.Int64),
        _col(wait, "sync_wait_ns", pl.Int64),
        _col(transfer, "transfer_ns", pl.Int64),
        _col(complete, "complete", pl.Boolean),
    ]
    out = _arrow.frame_of(cols)
    instance = inst_o
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
            _col(g_step, "step", pl.Int64),
            _col(rk[at], "rank", pl.Int32),
            _col(count, "collectives", pl.UInt32),
            _col(total(late), "late_ns", pl.Int64),
            _col(total(is_last), "last_arrivals", pl.UInt32),
            _col(caused_g, "caused_wait_ns", pl.Int64),
            _col((caused_g == top_g) & (top_g > 0), "straggler", pl.Boolean),
        ]
    )
