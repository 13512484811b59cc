"""Event frames of small made-up training runs with known timings, for the predictor's tests.

A CPU DDP step per rank (ns): data wait, host gap, forward region, backward region (its buckets
become ready at given offsets; their all-reduces end ``wait`` after the backward compute ends),
the backward's tail after the wait, the optimizer. Ranks may compute slower by a factor; a step
may wait longer for its data on every rank (``jitter``: a noisy run).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from stallscope import SCHEMA

MS = 1_000_000


@dataclass
class CpuRun:
    ranks: int = 2
    steps: int = 6
    data: int = 2 * MS
    host: int = 1 * MS
    forward: int = 10 * MS
    backward: int = 20 * MS
    wait: int = 5 * MS
    tail: int = 1 * MS
    optimizer: int = 3 * MS
    buckets: list[tuple[int, int]] = field(
        default_factory=lambda: [(1 << 20, 8 * MS), (4 << 20, 20 * MS)]
    )
    slow: dict[int, float] = field(default_factory=dict)  # rank -> compute factor
    nnodes: int = 1
    collectives: bool = True
    jitter: list[int] = field(default_factory=list)  # extra data wait per step (ns), all ranks

    def extra(self, step: int) -> int:
        return self.jitter[step % len(self.jitter)] if self.jitter else 0

    def period(self, rank: int) -> int:
        f = self.slow.get(rank, 1.0)
        compute = round(f * (self.forward + self.backward + self.tail + self.optimizer))
        return self.data + self.host + compute + self.wait

    def frame(self) -> pl.DataFrame:
        rows: list[dict[str, object]] = []

        def ev(rank: int, kind: str, cat: str, name: str, s: int, e: int, **kw: object) -> None:
            rows.append(
                {
                    "rank": rank,
                    "pid": 100 + rank,
                    "kind": kind,
                    "category": cat,
                    "name": name,
                    "start_ns": s,
                    "end_ns": e,
                    "lane": 7,
                    "device": -1,
                    "correlation": kw.get("corr", 0),
                    "bytes": kw.get("nbytes", 0),
                    "value": None,
                    "detail": kw.get("detail"),
                }
            )

        period = max(self.period(r) for r in range(self.ranks))
        for r in range(self.ranks):
            f = self.slow.get(r, 1.0)
            fwd = round(f * self.forward)
            tail, opt = round(f * self.tail), round(f * self.optimizer)
            for s in range(self.steps):
                t0 = 1_000 * MS + s * period + sum(self.extra(k) for k in range(s))
                ev(r, "step", "host", "step", t0, t0, corr=s + 1)
                data = self.data + self.extra(s)
                ev(r, "data_wait", "data", "next_batch", t0, t0 + data)
                a = t0 + data + self.host
                ev(r, "region", "compute", "forward", a, a + fwd)
                b = a + fwd
                # every rank's all-reduces end together: when the slowest rank's backward is done
                comm_end = (
                    t0
                    + data
                    + self.host
                    + round(
                        max(self.slow.get(q, 1.0) for q in range(self.ranks))
                        * (self.forward + self.backward)
                    )
                    + self.wait
                )
                ev(r, "region", "compute", "backward", b, comm_end + tail)
                for k, (nbytes, ready) in enumerate(self.buckets):
                    t = b + round(f * ready)
                    last = int(k == len(self.buckets) - 1)
                    ev(
                        r,
                        "bucket",
                        "comm",
                        f"bucket{k}",
                        t,
                        comm_end,
                        corr=k,
                        nbytes=nbytes,
                        detail=f"params=2;last={last};dtype=float32;group_size={self.ranks}",
                    )
                    if self.collectives:
                        ev(
                            r,
                            "collective",
                            "comm",
                            "all_reduce",
                            t + 10_000,
                            comm_end,
                            corr=s * len(self.buckets) + k,
                            nbytes=nbytes,
                            detail=f"group=pg0;group_size={self.ranks};nnodes={self.nnodes};"
                            f"backend=gloo;async=1",
                        )
                o = comm_end + tail
                ev(r, "region", "compute", "optimizer", o, o + opt)
            end = 1_000 * MS + self.steps * period + sum(self.extra(k) for k in range(self.steps))
            ev(r, "step", "host", "step", end, end, corr=self.steps + 1)
        return pl.DataFrame(rows, schema=SCHEMA)
