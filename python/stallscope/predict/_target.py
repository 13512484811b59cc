"""A target configuration: what to predict the measured job on."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Final

from stallscope.predict._errors import PredictError

#: Upper bounds that keep a typo from asking for a billion ranks.
MAX_NODES: Final = 100_000
MAX_RANKS_PER_NODE: Final = 1024
STRATEGIES: Final = ("ddp", "fsdp")


@dataclass(frozen=True)
class Target:
    """One configuration to predict.

    nodes, ranks_per_node: as `stallscope testbed` means them (ranks per node share the node's
    link). rate_bps: each node's link rate in bits/s (None: the link figures' own rate).
    network: a network of the link table between the nodes (e.g. "ib-ndr", "aws-efa-p4d";
    overrides rate_bps).
    intra_node_GBps: the link between the GPUs of a node, GB/s per GPU per direction (e.g. an
    instance's PCIe where the device ships with NVLink; overrides the calibration's and the
    device's own link). inter_node_gbps: each node's network, Gbit/s (an instance's network
    figure; overrides network's and rate_bps's bandwidth, keeping a named network's latency).
    device: another device type by name (None: the measured one). compute_scale: a measured
    ratio of compute time on the target to the profile's (overrides ``device``).
    accumulation: micro-batches per optimizer step (gradients all-reduced once, after the
    last). strategy: "ddp" (the measured buckets) or "fsdp" (parameters sharded: per-unit
    all-gather before forward and backward, reduce-scatter of gradients). straggler_factor /
    straggler_ranks: a slower class of ranks (compute times the factor); None: the profile's."""

    nodes: int
    ranks_per_node: int
    rate_bps: float | None = None
    network: str | None = None
    device: str | None = None
    intra_node_GBps: float | None = None  # noqa: N815 (unit suffix, as the catalog's column)
    inter_node_gbps: float | None = None
    compute_scale: float | None = None
    accumulation: int = 1
    strategy: str = "ddp"
    straggler_factor: float | None = None
    straggler_ranks: int | None = None

    def __post_init__(self) -> None:
        for name, n in (
            ("nodes", self.nodes),
            ("ranks_per_node", self.ranks_per_node),
            ("accumulation", self.accumulation),
            ("straggler_ranks", self.straggler_ranks),
        ):
            if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral)):
                raise PredictError(f"{name} must be a whole number, got {n!r}")
        reals: tuple[tuple[str, float | None], ...] = (
            ("rate_bps", self.rate_bps),
            ("intra_node_GBps", self.intra_node_GBps),
            ("inter_node_gbps", self.inter_node_gbps),
            ("compute_scale", self.compute_scale),
            ("straggler_factor", self.straggler_factor),
        )
        for name, x in reals:
            if x is not None and (isinstance(x, bool) or not isinstance(x, numbers.Real)):
                raise PredictError(f"{name} must be a number, got {x!r}")
        if not 1 <= self.nodes <= MAX_NODES:
            raise PredictError(f"nodes must be 1..{MAX_NODES}, got {self.nodes}")
        if not 1 <= self.ranks_per_node <= MAX_RANKS_PER_NODE:
            raise PredictError(
                f"ranks per node must be 1..{MAX_RANKS_PER_NODE}, got {self.ranks_per_node}"
            )
        if self.rate_bps is not None and not self.rate_bps > 0:
            raise PredictError(f"a link rate must be > 0 bit/s, got {self.rate_bps}")
        for name, v in (
            ("intra_node_GBps (GB/s per GPU per direction)", self.intra_node_GBps),
            ("inter_node_gbps (Gbit/s per node)", self.inter_node_gbps),
        ):
            if v is not None and not (v > 0 and v < float("inf")):
                raise PredictError(f"{name} must be a positive bandwidth, got {v}")
        if self.compute_scale is not None and not self.compute_scale > 0:
            raise PredictError(f"compute_scale must be > 0, got {self.compute_scale}")
        if self.accumulation < 1:
            raise PredictError(f"accumulation must be >= 1 micro-batch, got {self.accumulation}")
        if self.strategy not in STRATEGIES:
            raise PredictError(
                f"unknown strategy {self.strategy!r}: use one of {', '.join(STRATEGIES)}"
            )
        if self.straggler_factor is not None and self.straggler_factor < 1.0:
            raise PredictError(
                f"a straggler factor is a slowdown >= 1.0, got {self.straggler_factor}"
            )
        if self.straggler_ranks is not None and not 0 <= self.straggler_ranks < self.ranks:
            raise PredictError(
                f"straggler ranks must be 0..{self.ranks - 1} (some ranks must be typical), "
                f"got {self.straggler_ranks}"
            )

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node
