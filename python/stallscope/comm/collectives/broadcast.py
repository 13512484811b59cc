"""broadcast from the group's first rank. torch.distributed's broadcast works in place only."""

from __future__ import annotations

from stallscope.comm.collectives._base import Context, Prepared

_ROOT_VALUE = 42.0


class Broadcast:
    name = "broadcast"
    places = ("in",)

    def count(self, nbytes: int, p: int, elem_size: int) -> int:
        return nbytes // elem_size

    def prepare(self, ctx: Context, count: int, place: str) -> Prepared:
        buf = ctx.empty(count)
        buf.fill_(1.0)
        root = ctx.ranks[0]  # global rank of group rank 0

        def run() -> None:
            ctx.dist.broadcast(buf, src=root, group=ctx.group)

        def fill() -> None:
            buf.fill_(_ROOT_VALUE if ctx.rank == 0 else -1.0)

        def check() -> float:
            return float((buf.double() - _ROOT_VALUE).abs().max().item()) if count else 0.0

        return Prepared(run, fill, check)


COLLECTIVE = Broadcast()
