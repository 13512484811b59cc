"""The one benchmark harness: nccl-tests semantics over torch.distributed.

For every collective, tier, place and size: allocate buffers, run ``warmup`` operations, let the
group's first rank decide the number of timed iterations (so a slow link cannot make ranks disagree
and deadlock) and broadcast it, barrier, time ``iters`` operations back to back (synchronising the
device at the end, as nccl-tests does), and gather every rank's mean time per operation. The group's
first rank (always global rank 0) turns that into one row: time (median across ranks), min, max,
algbw and busbw (stallscope.comm._formulas).

Must run inside an initialised default process group (see _worker.run_worker).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from stallscope.comm import _formulas
from stallscope.comm.collectives import REGISTRY, Context

#: Tier names. intra_node: ranks on one node; inter_node: one rank per node; world: every rank
#: (spans both tiers when there are several nodes with several ranks each).
TIERS = ("world", "intra_node", "inter_node")


def parse_size(text: str) -> int:
    """'64K' / '16M' / '1G' / '4096' -> bytes (binary multiples, as nccl-tests)."""
    s = text.strip().upper().removesuffix("B")
    mult = 1
    for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if s.endswith(suffix):
            s, mult = s[:-1], m
            break
    try:
        value = float(s)
    except ValueError:
        raise ValueError(
            f"size {text!r} is not a number of bytes (e.g. 4096, 64K, 16M, 1G)"
        ) from None
    if value <= 0:
        raise ValueError(f"size {text!r} must be > 0")
    return int(value * mult)


def sweep_sizes(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """min, min*factor, ... up to max (inclusive), as nccl-tests -b/-e/-f; at most 64 sizes."""
    if min_bytes <= 0 or max_bytes < min_bytes:
        raise ValueError(f"need 0 < min_bytes <= max_bytes, got {min_bytes} and {max_bytes}")
    if factor <= 1.0:
        raise ValueError(f"size factor must be > 1, got {factor}")
    out: list[int] = []
    s = float(min_bytes)
    while s <= max_bytes * (1 + 1e-9) and len(out) < 64:
        out.append(round(s))
        s *= factor
    return out


@dataclass(frozen=True)
class SweepConfig:
    collectives: tuple[str, ...] = ("all_reduce",)
    min_bytes: int = 1 << 10
    max_bytes: int = 1 << 24
    factor: float = 2.0
    warmup: int = 2
    iters: int = 10
    places: tuple[str, ...] = ("in", "out")
    dtype: str = "float32"
    #: The first rank lowers ``iters`` so that one size takes at most this long (None: no limit).
    max_seconds_per_size: float | None = 10.0
    #: The first rank raises ``iters`` (up to ``max_iters``) so that the timed loop of one size lasts
    #: at least this long: averages out timer ticks and a shaped link's token-bucket burst.
    min_seconds_per_size: float = 0.0
    max_iters: int = 10_000
    #: ... and so that it moves at least this many bytes per rank's buffer (e.g. a few blocks:
    #: then the block median has blocks to choose from and a token bucket's burst is amortised).
    min_bytes_per_size: int = 0
    #: Warm-up runs at least this many bytes too (drains a shaped link's token bucket before timing).
    warmup_bytes: int = 0
    #: Operations are grouped into blocks of at least this many bytes for the robust time
    #: (block_median): 1 MiB, four times the test bed's token-bucket burst.
    block_bytes: int = 1 << 20
    check: bool = False
    tiers: tuple[str, ...] = ("world",)
    backend: str = "auto"  # auto | gloo | nccl
    timeout_s: float = 600.0

    def validate(self) -> None:
        unknown = [c for c in self.collectives if c not in REGISTRY]
        if unknown or not self.collectives:
            raise ValueError(
                f"unknown collective(s) {', '.join(unknown) or '(none)'}: "
                f"use {', '.join(REGISTRY)} or 'all'"
            )
        if any(p not in ("in", "out") for p in self.places) or not self.places:
            raise ValueError(f"places must be 'in' and/or 'out', got {self.places}")
        if any(t not in TIERS for t in self.tiers) or not self.tiers:
            raise ValueError(f"tiers must be among {', '.join(TIERS)}, got {self.tiers}")
        if self.warmup < 0 or self.iters < 1 or self.max_iters < self.iters:
            raise ValueError(
                f"need warmup >= 0 and 1 <= iters <= max_iters, got {self.warmup}, {self.iters}, "
                f"{self.max_iters}"
            )
        if self.min_bytes_per_size < 0 or self.warmup_bytes < 0 or self.block_bytes < 1:
            raise ValueError("min_bytes_per_size and warmup_bytes must be >= 0, block_bytes >= 1")
        if self.min_seconds_per_size < 0:
            raise ValueError(f"min_seconds_per_size must be >= 0, got {self.min_seconds_per_size}")
        if self.backend not in ("auto", "gloo", "nccl"):
            raise ValueError(f"backend must be auto, gloo or nccl, got {self.backend!r}")
        sweep_sizes(self.min_bytes, self.max_bytes, self.factor)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepConfig:
        d = dict(d)
        for k in ("collectives", "places", "tiers"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)


@dataclass
class Layout:
    """Which global ranks sit on which node (node ids are 0..nnodes-1)."""

    nodes: list[int]  # node id per global rank

    @property
    def nnodes(self) -> int:
        return len(set(self.nodes))

    def groups(self) -> dict[str, list[int]]:
        """Tier -> global ranks of its group (sorted; tiers with fewer than 2 ranks left out)."""
        world = list(range(len(self.nodes)))
        node0 = [r for r in world if self.nodes[r] == self.nodes[0]]
        firsts: dict[int, int] = {}
        for r in world:
            firsts.setdefault(self.nodes[r], r)
        out = {"world": world, "intra_node": node0, "inter_node": sorted(firsts.values())}
        return {k: v for k, v in out.items() if len(v) >= 2 or (k == "world" and len(v) == 1)}

    def tier_label(self, ranks: list[int]) -> str:
        nodes = {self.nodes[r] for r in ranks}
        if len(nodes) == 1:
            return "intra_node"
        return "inter_node" if len(nodes) == len(ranks) else "mixed"


@dataclass
class Row:
    collective: str
    tier: str
    place: str
    group_size: int
    nnodes: int
    bytes: int
    count: int
    dtype: str
    iters: int
    time_ns: float  # median across ranks of each rank's mean time per operation (nccl-tests)
    time_min_ns: float
    time_max_ns: float
    algbw_Bps: float  # noqa: N815 (unit suffix)
    busbw_Bps: float  # noqa: N815
    #: median across ranks of each rank's block median (see block_median; = time_ns on GPU)
    block_median_ns: float = 0.0
    #: largest across ranks of the time per operation the rank's threads spent runnable but
    #: waiting for a CPU (Linux schedstat; None where unavailable). Near 0 on a dedicated
    #: machine; large when other processes share the cores (the time then includes that wait).
    runq_wait_ns: float | None = None
    check_error: float | None = None
    rank_times_ns: list[float] = field(default_factory=list)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def block_median(per_op_ns: list[int], nbytes: int, block_bytes: int) -> float:
    """Median over blocks of consecutive operations of each block's mean time per operation.

    A block holds k = ceil(block_bytes / nbytes) operations. Back-to-back operations are not
    independent (a shaped link's token bucket, socket buffers and credits carry over: an operation
    delayed by a scheduler hiccup leaves the link idle and the next one runs faster), so the median
    of single operations is biased; block means absorb the carry-over and the median over blocks
    rejects the blocks a hiccup hit. With fewer than 3 blocks this is the plain mean."""
    n = len(per_op_ns)
    if n == 0:
        raise ValueError("no operation times")
    k = max(1, -(-block_bytes // max(nbytes, 1)))
    blocks = n // k
    if blocks < 3:
        return sum(per_op_ns) / n
    means = [sum(per_op_ns[i * k : (i + 1) * k]) / k for i in range(blocks)]
    return _median(means)


def runqueue_wait_ns() -> int | None:
    """Total time this process's threads have waited on a run queue (runnable, not running), in
    ns: the sum of field 2 of /proc/self/task/*/schedstat. None where the kernel does not
    provide it (not Linux, or built without schedstats)."""
    total, seen = 0, False
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
            seen = True
        except (OSError, IndexError, ValueError):
            continue  # a thread that just exited, or no schedstat
    return total if seen else None


def _sync(torch: Any, device: Any) -> None:
    if getattr(device, "type", "cpu") == "cuda":
        torch.cuda.synchronize(device)


def _time_size(
    ctx: Context, cfg: SweepConfig, name: str, place: str, nbytes: int, layout: Layout
) -> Row | None:
    torch, dist = ctx.torch, ctx.dist
    coll = REGISTRY[name]
    elem = torch.tensor([], dtype=ctx.dtype).element_size()
    count = coll.count(nbytes, ctx.size, elem)
    if count <= 0:
        return None
    prep = coll.prepare(ctx, count, place)
    err: float | None = None
    if cfg.check:
        prep.fill()
        prep.run()
        _sync(torch, ctx.device)
        err = prep.check()
    # Warm-up, timed on the first rank to choose the repetition count within the budget.
    warm = max(cfg.warmup, 1, math.ceil(cfg.warmup_bytes / (count * elem)))
    warm = min(warm, cfg.max_iters)
    t0 = time.perf_counter()
    for _ in range(warm):
        prep.run()
    _sync(torch, ctx.device)
    per_op = (time.perf_counter() - t0) / warm
    iters = cfg.iters
    if cfg.min_seconds_per_size > 0 and per_op > 0:
        iters = max(iters, min(cfg.max_iters, math.ceil(cfg.min_seconds_per_size / per_op)))
    if cfg.min_bytes_per_size > 0:
        iters = max(iters, min(cfg.max_iters, math.ceil(cfg.min_bytes_per_size / (count * elem))))
    if cfg.max_seconds_per_size is not None and per_op > 0:
        iters = max(1, min(iters, math.floor(cfg.max_seconds_per_size / per_op)))
    decided = torch.tensor([iters], dtype=torch.int64, device=ctx.device)
    dist.broadcast(decided, src=ctx.ranks[0], group=ctx.group)
    iters = int(decided.item())
    dist.barrier(group=ctx.group)
    per_op_ns: list[int] = []
    wait0 = runqueue_wait_ns()
    if getattr(ctx.device, "type", "cpu") == "cpu":
        # CPU collectives return when done: time every operation too (block_median resists the
        # scheduler hiccups of a shared machine); the loop stays back to back.
        clock = time.perf_counter_ns
        t0 = prev = clock()
        for _ in range(iters):
            prep.run()
            now = clock()
            per_op_ns.append(now - prev)
            prev = now
    else:
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            prep.run()
    _sync(torch, ctx.device)
    mine = (time.perf_counter_ns() - t0) / iters
    wait1 = runqueue_wait_ns()
    wait = -1.0 if wait0 is None or wait1 is None else (wait1 - wait0) / iters
    mine_med = block_median(per_op_ns, count * elem, cfg.block_bytes) if per_op_ns else mine
    mine_t = torch.tensor([mine, mine_med, -1.0 if err is None else err, wait], dtype=torch.float64)
    mine_t = mine_t.to(ctx.device)
    all_t = torch.empty(4 * ctx.size, dtype=torch.float64, device=ctx.device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(all_t, mine_t, group=ctx.group)
    vals = all_t.cpu().tolist()
    times = vals[0::4]
    block_medians = vals[1::4]
    errs = [e for e in vals[2::4] if e >= 0]
    waits = [w for w in vals[3::4] if w >= 0]
    med = _median(times)
    p = ctx.size
    return Row(
        collective=name,
        tier=layout.tier_label(list(ctx.ranks)),
        place=place,
        group_size=p,
        nnodes=len({layout.nodes[r] for r in ctx.ranks}),
        bytes=count * elem,
        count=count,
        dtype=cfg.dtype,
        iters=iters,
        time_ns=med,
        time_min_ns=min(times),
        time_max_ns=max(times),
        algbw_Bps=_formulas.algbw(count * elem, med * 1e-9),
        busbw_Bps=_formulas.busbw(name, count * elem, med * 1e-9, p),
        block_median_ns=_median(block_medians),
        runq_wait_ns=max(waits) if waits else None,
        check_error=max(errs) if errs else None,
        rank_times_ns=times,
    )


def run_sweep(
    cfg: SweepConfig, layout: Layout, torch: Any, device: Any, on_row: Any = None
) -> list[Row]:
    """Run the whole sweep; every rank must call it. Returns the rows on global rank 0 (others:
    empty). ``on_row(row)`` is called on rank 0 as each row completes (progress output)."""
    import torch.distributed as dist

    cfg.validate()
    dtype = getattr(torch, cfg.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype {cfg.dtype!r} is not a torch dtype (try float32, bfloat16)")
    me = dist.get_rank()
    groups = layout.groups()
    rows: list[Row] = []
    sizes = sweep_sizes(cfg.min_bytes, cfg.max_bytes, cfg.factor)
    for tier in cfg.tiers:
        ranks = groups.get(tier)
        if ranks is None:
            continue  # this tier does not exist in this job (e.g. inter_node on one node)
        # new_group must be entered by every rank, members or not, in the same order.
        group = None if len(ranks) == len(layout.nodes) else dist.new_group(ranks)
        if me in ranks:
            ctx = Context(torch, dist, group, tuple(ranks), ranks.index(me), device, dtype)
            for name in cfg.collectives:
                for place in cfg.places:
                    if place not in REGISTRY[name].places:
                        continue
                    for nbytes in sizes:
                        row = _time_size(ctx, cfg, name, place, nbytes, layout)
                        if row is not None and me == 0:
                            rows.append(row)
                            if on_row is not None:
                                on_row(row)
        dist.barrier()
    return rows
