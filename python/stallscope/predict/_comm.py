"""The communication model: how long one collective takes on a target configuration of N nodes
of G ranks, from per-tier link figures (latency alpha, seconds per byte beta) and the formulas of
stallscope.comm._formulas.

Two link tiers: ``intra`` (ranks of one node) and ``inter`` (one rank's path to another node);
a node's ranks share its NIC (``nic_bytes_per_s``) when several send across at once. Algorithms:

* one node: the collective's default algorithm over G ranks on the intra tier (NCCL's
  all-reduce: the faster of ring and tree);
* one rank per node: the same over N ranks on the inter tier;
* N x G, NCCL all-reduce: the faster of the flat ring and the tree, as NCCL's tuner picks per
  size. The ring's bandwidth is its slowest edge's, the inter-node one (NCCL's rings together
  cross at the node's network bandwidth); of its 2(p-1) steps the 2(N-1) that cross nodes pay
  the inter-node latency and the rest the intra-node one, as NCCL's tuner counts them. The
  tree has log-depth latency. No hierarchical all-reduce (reduce-scatter inside, all-reduce of
  n/G across, all-gather inside): NCCL runs none without in-network reduction (CollNet, NVLS),
  and its bus bandwidth, up to 1.9x the node's network on 2 nodes and 1.25x on 4, is above
  every public measurement from 3 nodes up (p5: 0.89x at 4-16 nodes;
  bench/predict_multinode.py). On 2 nodes NCCL's tree does exceed the network (1.14-1.19x
  measured on three clusters); the model's ring is that much below there;
* NCCL's tree all-reduce at mid sizes: its bandwidth term is divided by NCCL's own tree
  correction factor (0.5-0.9 from 512 KiB to 512 MiB, Simple protocol), the share of the
  model's tree bandwidth NCCL's tuner says its trees reach there;
* N x G, gloo: torch's gloo all-reduce is one ring over every rank (gloo's RING algorithm), so
  each step waits for the inter-node edge; its other collectives likewise. The calibration's
  own fit of a collective is used where it has one (gloo's all-gather, all-to-all and
  send/recv run at half the link rate once messages pass ~128 KiB: the lock-step the fit holds).

gloo runs a process group's collectives on two threads, so DDP's bucket all-reduces can overlap
and share the link; the link then moves the same bytes in the same time as back to back, so the
simulator sends buckets one after another (bench/testbed_gloo_concurrency.py, 200 Mbit/s, the
demo's two buckets: back to back 313.5 ms, both at once 312.1 ms, the second 33 ms later 312.1
ms; while the ranks' main threads spin on both cores 344.8 ms: collectives on a CPU need a core,
see the profile's comm_overlap).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from stallscope.comm import _formulas
from stallscope.comm._calibration import Calibration
from stallscope.predict._errors import PredictError

#: NCCL's treeCorrectionFactor for the Simple protocol: the share of the tree all-reduce's
#: modelled bandwidth its trees reach, by message size (index: log2(bytes / 64); from index 23,
#: 512 MiB, up: 1.0). NCCL's tuner applies it to every tree all-reduce ("Trees are not
#: perfectly sticking to the model for medium sizes"). Source: NVIDIA/nccl src/graph/tuning.cc
#: at commit 5067397c2676d5aed50042fc39e5c8ee96eb0027 (2026-06-01), treeCorrectionFactor.
TREE_CORRECTION: tuple[float, ...] = (
    0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
    0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9,
)  # fmt: skip


def tree_correction(nbytes: float) -> float:
    """NCCL's tree all-reduce bandwidth share at ``nbytes`` (TREE_CORRECTION)."""
    i = int(nbytes) >> 6
    k = i.bit_length() - 1 if i > 0 else 0
    return TREE_CORRECTION[k] if k < len(TREE_CORRECTION) else 1.0


@dataclass(frozen=True)
class Tier:
    """One tier's figures: alpha (s per algorithm step), beta (s per byte: 1 / bus bandwidth),
    per-collective fits where measured, the size range they were fitted on, and where they
    come from."""

    alpha_s: float
    beta_s_per_byte: float
    source: str
    fits: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    min_bytes: int | None = None
    max_bytes: int | None = None

    def of(self, collective: str) -> tuple[float, float]:
        """(alpha, beta) of ``collective``: its own fit, else the tier's."""
        return self.fits.get(collective, (self.alpha_s, self.beta_s_per_byte))

    def scaled(self, factor: float, source: str) -> Tier:
        """The same link with every beta times ``factor`` (another rate)."""
        return Tier(
            self.alpha_s,
            self.beta_s_per_byte * factor,
            source,
            {c: (a, b * factor) for c, (a, b) in self.fits.items()},
            self.min_bytes,
            self.max_bytes,
        )

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return 1.0 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else math.inf


@dataclass(frozen=True)
class CommModel:
    """Collective times on N nodes x G ranks (module docstring)."""

    backend: str
    intra: Tier | None
    inter: Tier | None
    nic_bytes_per_s: float | None = None
    #: Why a missing tier is missing, when there is more to say than "not given".
    missing: str = ""
    #: Per (collective, nodes, ranks per node): each algorithm's (c0 s, c1 s/byte).
    _lines: dict[tuple[str, int, int], list[tuple[float, float]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def _tier(self, which: str) -> Tier:
        link = self.intra if which == "intra" else self.inter
        if link is None:
            what = "within a node" if which == "intra" else "across nodes"
            fix = (
                "a network (--network, e.g. ib-ndr) or a link rate (--rate)"
                if which == "inter"
                else "name a device of the device table in the profile's measured.device "
                "(save it with -o, edit it, pass the file as RUN)"
            )
            why = f" ({self.missing})" if self.missing and which == "intra" else ""
            raise PredictError(
                f"no link figures for ranks {what}{why}: give a calibration (`stallscope bench "
                f"comm --calibrate FILE`, both tiers) or {fix}"
            )
        return link

    def seconds(self, collective: str, nbytes: float, nodes: int, per_node: int) -> float:
        """Time of one ``collective`` of ``nbytes`` (nccl-tests' size convention) over every
        rank of ``nodes`` x ``per_node``."""
        if nodes < 1 or per_node < 1:
            raise PredictError(f"nodes and ranks per node must be >= 1, got {nodes} x {per_node}")
        if nodes * per_node == 1 or nbytes <= 0:
            return 0.0
        key = (collective, nodes, per_node)
        lines = self._lines.get(key)
        if lines is None:  # every algorithm's time is c0 + c1 * n: two evaluations give it
            at0 = self._options(collective, 0.0, nodes, per_node, corrected=False)
            at1 = self._options(collective, 1.0, nodes, per_node, corrected=False)
            lines = [(a, b - a) for a, b in zip(at0, at1, strict=True)]
            self._lines[key] = lines
        if len(lines) == 2:  # NCCL's ring and tree: the tree's bandwidth at this size
            (r0, r1), (t0, t1) = lines
            return min(r0 + r1 * nbytes, t0 + t1 * nbytes / tree_correction(nbytes))
        return min(c0 + c1 * nbytes for c0, c1 in lines)

    def _options(
        self, collective: str, nbytes: float, nodes: int, per_node: int, corrected: bool = True
    ) -> list[float]:
        """The time of each algorithm the backend may pick (the fastest wins): NCCL's
        all-reduce [ring, tree], else [the collective's algorithm]; ``corrected``: the tree's
        bandwidth term at NCCL's tree correction for ``nbytes``."""
        out = self._raw_options(collective, nbytes, nodes, per_node)
        if corrected and len(out) == 2:
            lat = self._raw_options(collective, 0.0, nodes, per_node)[1]
            out[1] = lat + (out[1] - lat) / tree_correction(nbytes)
        return out

    def _raw_options(
        self, collective: str, nbytes: float, nodes: int, per_node: int
    ) -> list[float]:
        p = nodes * per_node
        if collective not in _formulas.ALGORITHMS:
            collective = "all_reduce"  # an unknown operation: priced as the common one
        nccl = self.backend == "nccl"
        tree = nccl and collective == "all_reduce"
        if nodes == 1 or per_node == 1:
            if nodes == 1:
                a, b = self._tier("intra").of(collective)
            else:
                a, b = self._tier("inter").of(collective)
                b = _formulas.shared_beta(b, 1, self.nic_bytes_per_s)
            out = [_formulas.predict_seconds(collective, nbytes, p, a, b)]
            if tree:
                out.append(_formulas.predict_seconds(collective, nbytes, p, a, b, algorithm="tree"))
            return out
        a_i, b_i = self._tier("intra").of(collective)
        a_n, b_n = self._tier("inter").of(collective)
        # Flat ring: each of its steps waits for the slowest edge, an inter-node one; one ring
        # edge leaves each node. NCCL runs several rings (channels) over the node's NICs, so
        # together they cross at the node's network bandwidth (a whole-node network's, or one
        # port per rank: G ports); gloo's one ring at one rank's path.
        if nccl:
            b_cross = 1.0 / (self.nic_bytes_per_s or per_node / b_n)
        else:
            b_cross = _formulas.shared_beta(b_n, 1, self.nic_bytes_per_s)
        b_edge = max(b_i, b_cross)
        if nccl:  # NCCL's tuner: of the ring's steps, the share crossing nodes pays a_n
            steps = _formulas.cost_terms(collective, p).latency_terms
            across = steps * (nodes - 1) / (p - 1)
            lat = (steps - across) * a_i + across * a_n
        else:  # gloo's steps are lock-step exchanges: each waits for the slowest edge
            lat = _formulas.predict_seconds(collective, 0.0, p, max(a_i, a_n), b_edge)
        out = [lat + _formulas.predict_seconds(collective, nbytes, p, 0.0, b_edge)]
        if tree:  # NCCL's tree: log-depth latency, each rank's 2n at the edge bandwidth
            out.append(
                _formulas.predict_seconds("all_reduce", nbytes, p, a_n, b_edge, algorithm="tree")
            )
        return out

    def describe(self) -> list[str]:
        """One line per tier: its bandwidth and where the figure comes from."""
        out = []
        for name, link in (("within a node", self.intra), ("across nodes", self.inter)):
            if link is None:
                continue
            out.append(
                f"{name}: {rate_text(link.bandwidth_bytes_per_s)} bus bandwidth, "
                f"{link.alpha_s * 1e6:.3g} us per step ({link.source})"
            )
        if self.nic_bytes_per_s is not None:
            out.append(f"per-node NIC: {rate_text(self.nic_bytes_per_s)} shared by its ranks")
        return out


def rate_text(bytes_per_s: float) -> str:
    """A bandwidth as people quote it: GB/s from 1 GB/s up, Mbit/s below."""
    if bytes_per_s >= 1e9:
        return f"{bytes_per_s / 1e9:.3g} GB/s"
    return f"{bytes_per_s * 8 / 1e6:.4g} Mbit/s"


def calibration_link(cal: Calibration, tier: str) -> Tier | None:
    """The figures of one tier of a calibration file ("intra_node" / "inter_node"): every
    collective's fit (in-place preferred); None when the file has no fit on that tier."""
    f = cal.fits
    rows = f.filter(f["tier"] == tier).sort(["place", "group_size"])
    if rows.height == 0:
        return None
    fits: dict[str, tuple[float, float]] = {}
    for c, a, b in rows.select("collective", "alpha_s", "beta_s_per_byte").iter_rows():
        fits.setdefault(str(c), (float(a), float(b)))
    base = fits.get("all_reduce") or fits.get("broadcast") or next(iter(fits.values()))
    return Tier(
        alpha_s=base[0],
        beta_s_per_byte=base[1],
        source=f"calibration {cal.source}, {tier} fits",
        fits=fits,
        min_bytes=int(rows["min_bytes"].min()),  # type: ignore[arg-type]
        max_bytes=int(rows["max_bytes"].max()),  # type: ignore[arg-type]
    )


def rate_link(rate_bps: float, mtu: int = 1500, alpha_s: float = 0.0) -> Tier:
    """A shaped Ethernet link of ``rate_bps`` carrying TCP: payload at tcp_efficiency(mtu)."""
    eff = _formulas.tcp_efficiency(mtu)
    return Tier(
        alpha_s=alpha_s,
        beta_s_per_byte=1.0 / (rate_bps / 8.0 * eff),
        source=f"link rate {rate_bps / 1e6:g} Mbit/s x TCP payload efficiency {eff:.3f} "
        f"(MTU {mtu})",
    )
