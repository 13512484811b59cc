"""Where this process sits in the job: rank, world size, local rank, node, from the launcher's
environment (torchrun / torch.distributed.run, and the common MPI and SLURM variables)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    host: str


def _first_int(names: tuple[str, ...], default: int) -> int:
    for n in names:
        v = os.environ.get(n)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return default


def placement(
    rank: int | None = None, world_size: int | None = None, local_rank: int | None = None
) -> Placement:
    """This process's placement; explicit arguments win over the environment."""
    r = (
        rank
        if rank is not None
        else _first_int(("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"), 0)
    )
    w = (
        world_size
        if world_size is not None
        else _first_int(("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"), 1)
    )
    lr = (
        local_rank
        if local_rank is not None
        else _first_int(("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"), 0)
    )
    lw = _first_int(("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"), 0) or max(w, 1)
    node = _first_int(("GROUP_RANK", "NODE_RANK", "SLURM_NODEID"), -1)
    if node < 0:
        node = r // lw if lw > 0 else 0
    if r < 0 or w < 1 or r >= w:
        raise ValueError(f"rank {r} is not inside world size {w}: check RANK / WORLD_SIZE")
    return Placement(r, w, lr, lw, node, socket.gethostname())
