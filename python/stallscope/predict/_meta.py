"""The measured configuration of a run: ranks, nodes, backend, device, from run.json (native
runs), the traces' own metadata (Kineto) or the events (collectives' details)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from stallscope._schema import GPU_KINDS, detail_value

if TYPE_CHECKING:
    from stallscope import KinetoImport

#: Devices per node assumed where a trace does not say (Kineto traces name no nodes): the
#: common 8-GPU server.
DEFAULT_GPUS_PER_NODE: Final = 8


@dataclass
class RunMeta:
    ranks: int
    nodes: int
    ranks_per_node: int
    backend: str
    device: str
    link_rate_bps: float | None = None
    loader_period_ns: float | None = None
    notes: list[str] = field(default_factory=list)


def _from_collectives(events: pl.DataFrame) -> tuple[int | None, str | None]:
    """(largest nnodes, backend) named by the collectives' details."""
    c = events.filter(pl.col("kind").is_in(("collective", "p2p")))
    details = c["detail"].drop_nulls().unique().to_list()
    nnodes = [int(v) for d in details if (v := detail_value(d, "nnodes")) and v.isdigit()]
    backends = [v for d in details if (v := detail_value(d, "backend"))]
    return (max(nnodes) if nnodes else None), (backends[0] if backends else None)


def _is_gpu(events: pl.DataFrame) -> bool:
    return bool(events["kind"].is_in(GPU_KINDS).any())


def _placement(ranks: int, nodes: int | None, notes: list[str], gpu: bool) -> tuple[int, int]:
    if nodes is None or nodes < 1:
        per = min(ranks, DEFAULT_GPUS_PER_NODE) if gpu else ranks
        nodes = max(1, -(-ranks // per))
        notes.append(
            f"the run does not say how its {ranks} rank(s) were placed on nodes: assumed "
            f"{nodes} node(s) of {per} (edit measured.nodes / ranks_per_node if not)"
        )
        return nodes, per
    return nodes, max(1, -(-ranks // nodes))


def loader_period(events: pl.DataFrame) -> float | None:
    """The loader's time per batch (ns) over its workers, when the loader traced itself: the
    data_fetch / data_prep regions of processes other than the one marking steps, per batch
    the main process waited for, divided by the workers; None otherwise."""
    main = events.filter(pl.col("kind") == "step").select("rank", "pid").unique()
    work = events.filter(
        (pl.col("kind") == "region") & pl.col("category").is_in(("data_fetch", "data_prep"))
    ).join(main, on=["rank", "pid"], how="anti")
    if work.height == 0:
        return None
    waits = events.filter(pl.col("kind") == "data_wait").group_by("rank").len()
    per_rank = (
        work.group_by("rank")
        .agg(busy=(pl.col("end_ns") - pl.col("start_ns")).sum(), workers=pl.col("pid").n_unique())
        .join(waits, on="rank")
    )
    if per_rank.height == 0:
        return None
    period = per_rank.select(pl.col("busy") / pl.col("len") / pl.col("workers")).to_series()
    return float(period.median())  # type: ignore[arg-type]


def meta_of_events(events: pl.DataFrame) -> RunMeta:
    """What the events alone say (an events frame handed in without its run directory)."""
    notes: list[str] = []
    ranks = max(1, events["rank"].n_unique())
    nnodes, backend = _from_collectives(events)
    gpu = _is_gpu(events)
    nodes, per = _placement(ranks, nnodes, notes, gpu)
    return RunMeta(
        ranks=ranks,
        nodes=nodes,
        ranks_per_node=per,
        backend=backend or ("nccl" if gpu else "gloo"),
        device="gpu" if gpu else "cpu",
        loader_period_ns=loader_period(events),
        notes=notes,
    )


def meta_of_run_dir(path: Path, events: pl.DataFrame) -> RunMeta:
    """A native run: run.json's world size, topology and backend."""
    import stallscope

    info = stallscope.run_info(path)
    procs = [p for p in info.processes.values() if isinstance(p, dict)]
    ranks = info.world_size or max(1, events["rank"].n_unique())
    topo = next((p.get("topology") for p in procs if p.get("topology")), None) or {}
    nnodes = topo.get("nnodes")
    backend = None
    for p in procs:
        td: Any = (p.get("backends") or {}).get("torch_dist") or {}
        backend = backend or td.get("backend")
    base = meta_of_events(events)
    notes: list[str] = []
    gpu = _is_gpu(events)
    if nnodes is None:
        nnodes = _from_collectives(events)[0]
    nodes, per = _placement(ranks, nnodes, notes, gpu)
    return RunMeta(
        ranks=ranks,
        nodes=nodes,
        ranks_per_node=per,
        backend=backend or base.backend,
        device=base.device,
        loader_period_ns=base.loader_period_ns,
        notes=notes,
    )


def meta_of_kineto(imp: KinetoImport) -> RunMeta:
    """Kineto traces: world size and backend from distributedInfo, the device from
    deviceProperties."""
    notes: list[str] = []
    events = imp.events
    ranks = imp.world_size or max(1, events["rank"].n_unique())
    backend = None
    device = None
    for m in imp.ranks.values():
        backend = backend or m.distributed_info.get("backend")
        if m.device_properties and not device:
            device = str(m.device_properties[0].get("name") or "") or None
    nodes, per = _placement(ranks, None, notes, _is_gpu(events))
    if len(imp.ranks) < ranks:
        notes.append(
            f"traces of {len(imp.ranks)} of {ranks} rank(s): the others are taken to behave "
            "like them"
        )
    return RunMeta(
        ranks=ranks,
        nodes=nodes,
        ranks_per_node=per,
        backend=backend or "nccl",
        device=device or ("gpu" if _is_gpu(events) else "cpu"),
        notes=notes,
    )
