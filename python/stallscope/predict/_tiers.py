"""Which link figures a prediction uses, per tier.

A target may give either tier's bandwidth itself (``Target.intra_node_GBps``, GB/s per GPU per
direction; ``Target.inter_node_gbps``, Gbit/s per node, shared by its ranks): an instance whose
GPUs talk over PCIe though the device ships with NVLink, a cloud's network figure. That
bandwidth then wins over everything below; its latency is a named network's, else that of the
link-table entry nearest in bandwidth.

Within a node, the first that applies: the calibration's intra-node fits (when the target keeps
the measured device); the measured run's own link (a CPU run on one node, no calibration:
fitted to its exposed all-reduce time, _own_link); the link the (target, else measured) device ships with, from the link table
(NVLink, NVSwitch, PCIe: bandwidth per direction per GPU, NCCL's latency).

Across nodes, the first that applies: a network of the link table named by the target
(``Target.network``: InfiniBand, a cloud's network, Ethernet); a link rate (``Target.rate_bps``:
the calibration's inter-node fits rescaled from the rate they were measured at, else the rate
times TCP's payload efficiency); the calibration's inter-node fits. None: a prediction across
nodes is an error naming the options.

The node's NIC (shared by its ranks): a network's whole-node figure (cloud networks), one port
per rank (InfiniBand, Ethernet ports), or the link itself (a rate, a calibration taken with one
rank per node).
"""

from __future__ import annotations

import math

from stallscope.comm._calibration import Calibration
from stallscope.predict._catalog import CatalogError
from stallscope.predict._comm import CommModel, Tier, calibration_link, rate_link
from stallscope.predict._devices import device
from stallscope.predict._errors import PredictError
from stallscope.predict._links import Link as TableLink
from stallscope.predict._links import link, link_names
from stallscope.predict._profile import Profile
from stallscope.predict._target import Target


def _nearest(tier: str, bytes_per_s: float) -> TableLink:
    """The link-table entry of ``tier`` nearest in bandwidth (per GPU within a node, per node
    across nodes): whose latency a bandwidth given alone takes."""
    best: TableLink | None = None
    for name in link_names():
        t = link(name)
        if t.tier != tier:
            continue
        if best is None or abs(math.log(t.bytes_per_s / bytes_per_s)) < abs(
            math.log(best.bytes_per_s / bytes_per_s)
        ):
            best = t
    assert best is not None  # the shipped table has links of both tiers
    return best


def given_intra(gbytes_per_s: float) -> Tier:
    """Within a node at a given GB/s per GPU per direction, a line rate (the latency and NCCL
    efficiency of the table's link nearest in bandwidth)."""
    near = _nearest("intra", gbytes_per_s * 1e9)
    return Tier(
        near.latency_us * 1e-6,
        1.0 / (gbytes_per_s * 1e9 * near.efficiency),
        f"given: {gbytes_per_s:g} GB/s per GPU per direction{_eff(near)}; latency of "
        f"{near.name}, the link-table entry nearest in bandwidth",
    )


def _eff(t: TableLink) -> str:
    return f" x NCCL efficiency {t.efficiency:g}" if t.efficiency < 1.0 else ""


def given_inter(gbits_per_s: float, network: str | None) -> tuple[Tier, float]:
    """(one rank's path across nodes, the node's NIC) for a node network of ``gbits_per_s``:
    the node's line rate, shared by its ranks; the latency and NCCL efficiency of ``network``
    when named, else of the table's network nearest in bandwidth."""
    line = gbits_per_s * 1e9 / 8.0
    near = link(network) if network is not None else _nearest("inter", line)
    node = line * near.efficiency
    return (
        Tier(
            near.latency_us * 1e-6,
            1.0 / node,
            f"given: {gbits_per_s:g} Gbit/s per node{_eff(near)}, shared by its ranks; latency "
            f"of {near.name}",
        ),
        node,
    )


def _cite(t: TableLink) -> str:
    src = t.source("GBps_per_direction")
    out = f"link table: {t.name}, {t.nominal} ({src.url}, {src.date})"
    if t.efficiency < 1.0:
        e = t.source("efficiency")
        out += f" x NCCL efficiency {t.efficiency:g} ({e.url}, {e.date})"
    return out


def table_intra(device_name: str) -> Tier | None:
    """The intra-node link a device ships with, or None (not in the table, or no link)."""
    try:
        name = device(device_name).intra_node_link
    except CatalogError:
        return None
    if name is None:
        return None
    t = link(name)
    return Tier(t.latency_us * 1e-6, 1.0 / t.effective_bytes_per_s, _cite(t))


def table_inter(name: str) -> tuple[Tier, float | None]:
    """(one rank's path across nodes, the node's NIC bandwidth or None) of a network."""
    try:
        t = link(name)
    except CatalogError as e:
        raise PredictError(f"unknown network: {e}") from None
    if t.tier != "inter":
        raise PredictError(
            f"{t.name} is a link within a node, not a network between nodes: give an inter-node "
            "link (e.g. ib-ndr, aws-efa-p4d, ethernet-100g; `stallscope catalog links`)"
        )
    node = t.effective_bytes_per_s
    if t.per == "node":  # a whole node's network: each rank's path is one of its NICs
        path = node / (t.nics_per_node or t.gpus_per_node or 1)
        return Tier(t.latency_us * 1e-6, 1.0 / path, _cite(t)), node
    return Tier(t.latency_us * 1e-6, 1.0 / node, _cite(t) + ", one port per rank"), None


def bucket_link(prof: Profile) -> Tier | None:
    """The measured run's own tier from its bucket all-reduces as timed: the fastest seconds per
    byte of ring all-reduce traffic. Their times hold waits too, so this is a bound (the link is
    at least this fast); _own_link fits the link itself."""
    p = prof.measured.ranks
    if p < 2:
        return None
    best = None
    for b in prof.buckets:
        if b.bytes > 0 and b.measured_ns > 0:
            per = b.measured_ns * 1e-9 / (2 * (p - 1) / p * b.bytes)
            best = per if best is None else min(best, per)
    if best is None:
        return None
    return Tier(0.0, best, "the measured run's bucket all-reduces (fastest per byte)")


def uses_own_link(prof: Profile, cal_intra: Tier | None) -> bool:
    """Whether the tier within a node is the measured run's own: a CPU run of several ranks on
    one node, no calibration of that tier."""
    m = prof.measured
    return cal_intra is None and m.device == "cpu" and m.nodes == 1 and m.ranks > 1


Key = tuple[str | None, str | None, float | None, float | None, float | None]


class Tiers:
    """The comm models of one profile and calibration: the measured configuration's and each
    target's (cached by device, network and rate)."""

    def __init__(
        self,
        prof: Profile,
        cal: Calibration | None,
        mtu: int,
        notes: set[str],
        own: Tier | None = None,
    ):
        self.prof, self.cal, self.mtu, self.notes = prof, cal, mtu, notes
        self.own = own if own is not None else bucket_link(prof)
        backend = prof.measured.backend
        if cal is not None:
            cb = str(cal.doc.get("backend") or "")
            if cb and cb != backend:
                raise PredictError(
                    f"the calibration {cal.source} was measured with {cb}, the run uses "
                    f"{backend}: calibrate with the run's backend (`stallscope bench comm "
                    f"--backend {backend} --calibrate FILE`)"
                )
        self.cal_intra = calibration_link(cal, "intra_node") if cal is not None else None
        self.cal_inter = calibration_link(cal, "inter_node") if cal is not None else None
        link_doc = (cal.doc.get("link") if cal is not None else None) or {}
        self.cal_rate = float(link_doc["rate_bps"]) if link_doc.get("rate_bps") else None
        self.cal_mtu = int(link_doc["mtu"]) if link_doc.get("mtu") else None
        self._cache: dict[Key, CommModel] = {}
        self._used: dict[Key, None] = {}
        self.base = self.for_target(None, prof.measured.network, None)

    def _intra(self, dev: str | None, given: float | None = None) -> Tier | None:
        if given is not None:
            return given_intra(given)
        m = self.prof.measured
        same = dev is None or dev == m.device
        if self.cal_intra is not None and same:
            return self.cal_intra
        if uses_own_link(self.prof, self.cal_intra) and same:
            return self.own
        return table_intra(dev or m.device)

    def _inter(
        self, network: str | None, rate: float | None, given: float | None = None
    ) -> tuple[Tier | None, float | None]:
        if given is not None:
            if network is not None:
                table_inter(network)  # a bad name is still an error
            return given_inter(given, network)
        if network is not None:
            return table_inter(network)
        if rate is not None:
            if self.cal_inter is not None and self.cal_rate:
                inter = self.cal_inter.scaled(
                    self.cal_rate / rate,
                    f"{self.cal_inter.source}, measured at {self.cal_rate / 1e6:g} Mbit/s, "
                    f"rescaled to {rate / 1e6:g} Mbit/s",
                )
            else:
                if self.cal_inter is not None:
                    self.notes.add(
                        f"the calibration {self.cal.source if self.cal else ''} does not record "
                        "its link rate: the inter-node figure comes from the rate given, not from "
                        "the calibration (run `bench comm --calibrate` under `stallscope testbed` "
                        "to record it)"
                    )
                alpha = self.cal_inter.alpha_s if self.cal_inter is not None else 0.0
                inter = rate_link(rate, self.cal_mtu or self.mtu, alpha)
            return inter, inter.bandwidth_bytes_per_s
        if self.cal_inter is not None:
            return self.cal_inter, self.cal_inter.bandwidth_bytes_per_s
        return None, None

    def for_target(
        self,
        dev: str | None,
        network: str | None,
        rate: float | None,
        intra_gbytes: float | None = None,
        inter_gbits: float | None = None,
    ) -> CommModel:
        key = (dev, network, rate, intra_gbytes, inter_gbits)
        got = self._cache.get(key)
        if got is None:
            inter, nic = self._inter(network, rate, inter_gbits)
            intra = self._intra(dev, intra_gbytes)
            missing = ""
            if intra is None:
                name = dev or self.prof.measured.device
                missing = f"{name!r} is not in the device table, so its link is unknown"
            got = CommModel(self.prof.measured.backend, intra, inter, nic, missing)
            self._cache[key] = got
        return got

    def network_of(self, t: Target) -> str | None:
        """The link-table network ``t`` is priced on: its own, else the measured run's when
        nothing else (a rate, a bandwidth, a calibration) names the link across nodes."""
        if t.network is not None or t.rate_bps is not None or t.inter_node_gbps is not None:
            return t.network
        return self.prof.measured.network if self.cal_inter is None else None

    def target(self, t: Target) -> CommModel:
        key = (t.device, self.network_of(t), t.rate_bps, t.intra_node_GBps, t.inter_node_gbps)
        self._used.setdefault(key, None)
        return self.for_target(*key)

    def used(self) -> list[CommModel]:
        """The targets' comm models, in the order first used."""
        return [self._cache[k] for k in self._used]
