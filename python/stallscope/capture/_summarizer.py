"""The per-step summary a continuous trace writes as it runs: one row per completed step, from
the rank's own events (io/_summary_files.py has the row; analysis/stall/_exposed.py the rank's
part of the stall table that it holds).

The writer thread hands every drained chunk to `Summarizer.add`, and calls `tick` at each
flush. A step is summarized once its end (the next step marker) was drained and ``lag_ns``
has passed since it: events are drained when they end, and GPU records reach the rings up to
a CUPTI flush period late, so the events of a step are then all there. An event that ends
later than that (a region spanning many steps, an asynchronous collective that completes
steps later) is missing from the rows of the steps already written; the full events (window,
on-demand captures) still have it. Events are kept until no step they overlap remains to be
summarized, at most ``max_events`` of them (beyond, the oldest are let go and counted in
run.json as ``summary.events_not_summarized``).

In a trace whose device events come in windows (capture/_device_duty.py), a step outside them
has its step time, data columns and arrivals, and null device columns (``device`` false).

Two facts of the stall table are about the whole run, and are taken here as the rank has seen
them so far: whether the run is a GPU run (then only GPU activity computes), and whether the
rank has a collective spanning nodes (then its DDP buckets and comm kernels count as network).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from stallscope.analysis.stall._exposed import local_parts
from stallscope.analysis.stall._table import comm_spans
from stallscope.io._summary_files import DEVICE_COLUMNS, SummaryWriter
from stallscope.io._summary_files import STALL_COLUMNS as _STALL

_KEPT = ("collective", "p2p", "bucket", "step")


def _slim(table: pa.Table) -> pl.DataFrame:
    """The columns the stall table reads (analysis/stall/_sources.py NEEDED), with names,
    details and sizes of the comm rows and step markers only: what the buffer holds."""
    df = pl.from_arrow(
        table.select(
            [
                "rank",
                "kind",
                "category",
                "name",
                "start_ns",
                "end_ns",
                "lane",
                "correlation",
                "bytes",
                "detail",
            ]
        )
    )
    assert isinstance(df, pl.DataFrame)
    kept = pl.col("kind").is_in(_KEPT)
    return df.with_columns(
        *(pl.when(kept).then(pl.col(c)).alias(c) for c in ("name", "detail")),
        bytes=pl.when(kept).then(pl.col("bytes")).otherwise(pl.lit(0, pl.Int64)),
    )


class Summarizer:
    """Turns one process's drained events into summary rows (see the module docstring)."""

    def __init__(self, out: SummaryWriter, lag_ns: int, max_events: int = 1_000_000) -> None:
        self.out = out
        self.lag_ns = lag_ns
        self.max_events = max_events
        self._new: list[pa.Table] = []
        self._buffer: pl.DataFrame | None = None
        self._cut: int | None = None  # the end of the last step written
        # arrivals written (key, seq, start) -> their end, while they may still be buffered
        self._sent: dict[tuple[str, int | None, int], int] = {}
        self.gpu = False
        self.device: Any = None  # _device_duty.DeviceDuty when device events come in windows
        self.multi = np.zeros(0, np.int32)
        self.rows = 0
        self.events_not_summarized = 0
        self.error: str | None = None

    def add(self, table: pa.Table) -> None:
        self._new.append(table)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rows": self.rows,
            "events_not_summarized": self.events_not_summarized,
            "bytes_written": self.out.bytes_written,
            "lag_s": self.lag_ns / 1e9,
        }
        if self.error:
            out["error"] = self.error
        return out

    def tick(self, now_ns: int, final: bool = False) -> int:
        """Write the rows of the steps that are complete (all of them when `final`); returns
        how many."""
        if self._new:
            fresh = _slim(pa.concat_tables(self._new))
            self._new.clear()
            self._buffer = fresh if self._buffer is None else pl.concat([self._buffer, fresh])
        buf = self._buffer
        if buf is None or buf.height == 0:
            return 0
        if self.device is not None:
            self.gpu = True  # a GPU run, whether or not a device window has come yet
        parts = local_parts(buf, gpu=self.gpu, multi=self.multi)
        self.gpu, self.multi = parts.gpu, parts.multi
        t = parts.table
        ready = np.ones(t.height, bool)
        if not final:
            ready &= t["end_ns"].to_numpy() <= now_ns - self.lag_ns
        if self._cut is not None:
            ready &= t["start_ns"].to_numpy() >= self._cut
        done = t.filter(pl.Series(ready))
        if done.height:
            self._write(done, parts.exposed, parts.arrivals, buf)
            self._cut = int(done["end_ns"].max())  # type: ignore[arg-type]
        if final:
            self._write_rest(parts.arrivals)
        self._trim(buf)
        return done.height

    def _write_rest(self, arrivals: pl.DataFrame) -> None:
        """At stop: the arrivals no step row took (after the last step), in a row of their
        own (``arrivals_only``): another rank's wait may end with one of them."""
        rest = [
            (key, seq, a, b, size)
            for key, seq, a, b, size in arrivals.select(
                "key", "seq", "start_ns", "end_ns", "group_size"
            ).iter_rows()
            if (key, seq, a) not in self._sent
        ]
        if not rest:
            return
        for key, seq, a, b, _ in rest:
            self._sent[(key, seq, a)] = b
        row: dict[str, Any] = {k: None for k in ("step", "start_ns", "end_ns", "step_ns")}
        row.update({k: 0 for k in _STALL}, rank=int(self._rank(arrivals)), events=0)
        row.update(exp_start=[], exp_end=[], exp_net=[], arrivals_only=True, device=True)
        for i, k in enumerate(("coll_key", "coll_seq", "coll_start", "coll_end", "coll_size")):
            row[k] = [x[i] for x in rest]
        self.out.append([row])

    @staticmethod
    def _rank(arrivals: pl.DataFrame) -> int:
        return int(arrivals["rank"][0])

    def _write(
        self, done: pl.DataFrame, exposed: pl.DataFrame, arrivals: pl.DataFrame, buf: pl.DataFrame
    ) -> None:
        starts = done["start_ns"].to_numpy()
        ends = done["end_ns"].to_numpy()
        n = done.height
        exp: list[list[tuple[int, int, bool]]] = [[] for _ in range(n)]
        if exposed.height:
            row_of = {int(s): i for i, s in enumerate(starts.tolist())}
            for s0, a, b, net in exposed.select(
                "step_start_ns", "start_ns", "end_ns", "network"
            ).iter_rows():
                i = row_of.get(s0)
                if i is not None:
                    exp[i].append((a, b, net))
        coll: list[list[tuple[Any, ...]]] = [[] for _ in range(n)]
        last_end = int(ends.max())
        for key, seq, a, b, size in arrivals.select(
            "key", "seq", "start_ns", "end_ns", "group_size"
        ).iter_rows():
            ident = (key, seq, a)
            if a >= last_end or ident in self._sent:
                continue
            self._sent[ident] = b
            # The row of the step holding its start; an arrival before them all (or one that
            # came late) goes with the first row written now.
            i = max(int(np.searchsorted(starts, a, side="right")) - 1, 0)
            coll[i].append((key, seq, a, b, size))
        ev_s, ev_e = buf["start_ns"].to_numpy(), buf["end_ns"].to_numpy()
        es, ee = np.sort(ev_s), np.sort(ev_e)
        # events overlapping [s, e): started before e, minus ended at or before s (instants
        # at s count: a step's own marker is one of its events)
        overlap = np.searchsorted(es, ends, side="left") - np.searchsorted(ee, starts, "left")
        rows = []
        for i, r in enumerate(done.iter_rows(named=True)):
            row = {k: r[k] for k in ("rank", "step", "start_ns", "end_ns", "step_ns", *_STALL)}
            row["events"] = int(overlap[i])
            row["exp_start"] = [x[0] for x in exp[i]]
            row["exp_end"] = [x[1] for x in exp[i]]
            row["exp_net"] = [x[2] for x in exp[i]]
            row["coll_key"] = [x[0] for x in coll[i]]
            row["coll_seq"] = [x[1] for x in coll[i]]
            row["coll_start"] = [x[2] for x in coll[i]]
            row["coll_end"] = [x[3] for x in coll[i]]
            row["coll_size"] = [x[4] for x in coll[i]]
            row["arrivals_only"] = False
            row["device"] = (
                self.device is None or r["step"] is None or self.device.covered(int(r["step"]))
            )
            if not row["device"]:  # no device events: what only the device could say is unknown
                row.update({c: None for c in DEVICE_COLUMNS}, exp_start=[], exp_end=[], exp_net=[])
            rows.append(row)
        self.out.append(rows)
        self.rows += len(rows)

    def _trim(self, buf: pl.DataFrame) -> None:
        """Keep the events that overlap a step not yet written, the instants at its start
        (its marker; a collective arriving right at it, which no written row took), the
        communication in flight across the cut on each thread, whole (`_in_flight`), and the
        markers of the steps where the kept events start: the stall table places an event by
        its start (a DDP bucket in the step it began, whose latest bucket starts the wait for
        the gradient all-reduces until the communication then in flight ends), and a step's
        window needs its marker."""
        if self._cut is not None:
            cut = self._cut
            keep = (pl.col("end_ns") > cut) | (pl.col("start_ns") >= cut) | _in_flight(buf, cut)
            marker = pl.col("kind") == "step"
            earliest = buf.filter(marker)["start_ns"].min()
            if earliest is not None:  # the first kept event that a step holds, and its step
                kept = buf.filter(keep & ~marker & (pl.col("start_ns") >= earliest))
                first = kept["start_ns"].min()
                if first is not None:
                    since = buf.filter(marker & (pl.col("start_ns") <= first))["start_ns"].max()
                    keep = keep | (marker & (pl.col("start_ns") >= since))
            buf = buf.filter(keep)
            self._sent = {k: e for k, e in self._sent.items() if e > cut}
        if buf.height > self.max_events:
            drop = buf.height - self.max_events
            order = buf["end_ns"].arg_sort()
            self.events_not_summarized += drop
            buf = buf[order[drop:].sort()]
        self._buffer = buf.rechunk()  # one chunk: trimmed chunks would pile up


def _in_flight(buf: pl.DataFrame, cut: int) -> pl.Series:
    """Per event of `buf`: whether it is a bucket, collective or p2p call of a thread's
    communication in flight across `cut`: the span of the thread's touching comm events (the
    spans the stall table's wait for DDP's gradient all-reduces ends with, `comm_spans`) that
    ends after the cut. A bucket that ended before the cut starts a wait that does not, when
    a collective of its span runs on."""
    out = np.zeros(buf.height, bool)
    comm = buf.with_row_index("_i").filter(pl.col("kind").is_in(("collective", "p2p", "bucket")))
    t = comm_spans(comm.select("_i", "rank", pl.col("lane").fill_null(0), "start_ns", "end_ns"))
    if t.height:
        late = t.group_by("_g").agg(_e=pl.col("end_ns").max()).filter(pl.col("_e") > cut)["_g"]
        out[t.filter(pl.col("_g").is_in(late.implode()))["_i"].to_numpy()] = True
    return pl.Series(out)
