"""The configurations the differential stall method runs, and which definition each feeds.

With G = nodes x ranks_per_node devices (Stash's "the same G devices"):

=================  =====  =====  =========  =======  ============================================
run                ranks  nodes  data       cache    feeds
=================  =====  =====  =========  =======  ============================================
``one``            1      1      synthetic           interconnect (subtrahend)
``synthetic``      G      1      synthetic           prep (subtrahend), interconnect, network
``cached``         G      1      real       cached   prep, fetch (subtrahend)
``cold``           G      1      real       cold     fetch
``network@RATE``   G      N      synthetic           network, one run per link rate
=================  =====  =====  =========  =======  ============================================

``one`` is left out when G is 1, the network runs when N is 1, and the parts asked to be
skipped (data: cached and cold; interconnect: one; network).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from stallscope.exceptions import AnalyzeError

PARTS: Final = ("data", "interconnect", "network")


@dataclass(frozen=True)
class RunConfig:
    """One way of running the job. rate: the test bed's link rate (tc units), None for runs
    on one node without the test bed."""

    name: str
    ranks: int
    nodes: int
    data: str  # synthetic | real
    cache: str | None = None  # cached | cold | None
    rate: str | None = None

    @property
    def ranks_per_node(self) -> int:
        return self.ranks // self.nodes

    @property
    def testbed(self) -> bool:
        return self.nodes > 1


def network_name(rate: str) -> str:
    return f"network@{rate}"


def plan(
    nodes: int, ranks_per_node: int, rates: Sequence[str], skip: Sequence[str] = ()
) -> list[RunConfig]:
    """The runs for G = nodes x ranks_per_node devices, in the order they are run (the
    table of the module docstring)."""
    unknown = [s for s in skip if s not in PARTS]
    if unknown:
        raise AnalyzeError(f"cannot skip {unknown}: the parts are {', '.join(PARTS)}")
    if nodes < 1 or ranks_per_node < 1:
        raise AnalyzeError(f"nodes ({nodes}) and ranks per node ({ranks_per_node}) must be >= 1")
    g = nodes * ranks_per_node
    runs: list[RunConfig] = []
    if g > 1 and "interconnect" not in skip:
        runs.append(RunConfig("one", 1, 1, "synthetic"))
    runs.append(RunConfig("synthetic", g, 1, "synthetic"))
    if "data" not in skip:
        runs.append(RunConfig("cached", g, 1, "real", "cached"))
        runs.append(RunConfig("cold", g, 1, "real", "cold"))
    if nodes > 1 and "network" not in skip:
        if not rates:
            raise AnalyzeError("the network stall needs a link rate: give --rate (e.g. 1gbit)")
        seen: set[str] = set()
        for r in rates:
            if r in seen:
                continue
            seen.add(r)
            runs.append(RunConfig(network_name(r), g, nodes, "synthetic", rate=r))
    return runs
