"""The one interface every benchmarked collective implements, and the context it runs in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Context:
    """Where a collective runs: torch modules, the process group and this rank's place in it."""

    torch: Any  # the torch module (imported lazily by the harness)
    dist: Any  # torch.distributed
    group: Any  # a ProcessGroup (None = the default world group)
    ranks: tuple[int, ...]  # global ranks of the group, in group-rank order
    rank: int  # this process's rank inside the group
    device: Any  # torch.device of the buffers
    dtype: Any  # torch.dtype of the buffers

    @property
    def size(self) -> int:
        return len(self.ranks)

    def empty(self, count: int) -> Any:
        return self.torch.empty(count, dtype=self.dtype, device=self.device)


@dataclass
class Prepared:
    """Buffers allocated for one (size, place): ``run`` issues one operation; ``fill`` writes the
    check pattern into the inputs; ``check`` returns the largest deviation from the expected output
    after one ``fill`` + ``run`` (0.0 when exact)."""

    run: Callable[[], None]
    fill: Callable[[], None]
    check: Callable[[], float]


class Collective(Protocol):
    name: str
    #: "in" (in-place) and/or "out" (out-of-place): what torch.distributed's API can express.
    places: tuple[str, ...]

    def count(self, nbytes: int, p: int, elem_size: int) -> int:
        """Elements of the reported buffer for a requested size (nccl-tests rounding: down to a
        multiple of p where the buffer is split in p chunks); 0 if the size is too small."""
        ...

    def prepare(self, ctx: Context, count: int, place: str) -> Prepared: ...


def chunked_count(nbytes: int, p: int, elem_size: int) -> int:
    """Elements for a buffer split in p equal chunks, rounded down."""
    per = nbytes // elem_size // p
    return per * p


def max_deviation(torch: Any, actual: Any, expected: Any) -> float:
    """Largest absolute difference (as a Python float) between two tensors."""
    if actual.numel() == 0:
        return 0.0
    return float(torch.max(torch.abs(actual.double() - expected.double())).item())
