"""Where every rank runs: host, node index, local rank; and how many nodes a group spans."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

NODE_ENV = "STALLSCOPE_NODE_ID"  # overrides the node identity (emulated nodes on one host)


def node_key() -> str:
    """This process's node identity: STALLSCOPE_NODE_ID, else host name plus the launcher's node
    rank (torchrun's GROUP_RANK: emulated nodes in network namespaces share a host name)."""
    forced = os.environ.get(NODE_ENV)
    if forced:
        return forced
    node = os.environ.get("GROUP_RANK") or os.environ.get("NODE_RANK") or ""
    return f"{socket.gethostname()}#{node}"


@dataclass
class Topology:
    hosts: list[str] = field(default_factory=list)  # per global rank
    node_of: list[int] = field(default_factory=list)  # per global rank: node index
    local_rank: list[int] = field(default_factory=list)  # per global rank

    @property
    def nnodes(self) -> int:
        return len(set(self.node_of)) if self.node_of else 1

    def nodes_spanned(self, ranks: list[int]) -> int:
        if not self.node_of:
            return 1
        return len({self.node_of[r] for r in ranks if 0 <= r < len(self.node_of)}) or 1

    def as_json(self, rank: int) -> dict[str, Any]:
        return {
            "host": self.hosts[rank] if rank < len(self.hosts) else socket.gethostname(),
            "node_index": self.node_of[rank] if rank < len(self.node_of) else 0,
            "local_rank": self.local_rank[rank] if rank < len(self.local_rank) else 0,
            "nnodes": self.nnodes,
            "node_of_rank": self.node_of,
            "hosts": self.hosts,
        }


def from_rows(rows: list[tuple[str, str, int]]) -> Topology:
    """rows[r] = (host, node key, local rank) of global rank r; nodes numbered by first rank."""
    index: dict[str, int] = {}
    for _, key, _ in rows:
        index.setdefault(key, len(index))
    return Topology(
        hosts=[h for h, _, _ in rows],
        node_of=[index[k] for _, k, _ in rows],
        local_rank=[lr for _, _, lr in rows],
    )


def this_rank() -> tuple[str, str, int]:
    """(host, node key, local rank) of this process."""
    return (socket.gethostname(), node_key(), int(os.environ.get("LOCAL_RANK", "0") or 0))


def from_posts(posts: dict[int, str], world: int) -> Topology:
    """Topology from each rank's JSON-posted this_rank(); ranks that posted nothing count as one
    unknown node ("?")."""
    import json

    rows = []
    for r in range(world):
        if r in posts:
            h, k, lr = json.loads(posts[r])
            rows.append((str(h), str(k), int(lr)))
        else:
            rows.append(("?", "?", -1))
    return from_rows(rows)
