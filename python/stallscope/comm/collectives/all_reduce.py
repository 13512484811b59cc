"""all_reduce (sum). torch.distributed's all_reduce works in place only."""

from __future__ import annotations

from stallscope.comm.collectives._base import Context, Prepared


class AllReduce:
    name = "all_reduce"
    places = ("in",)

    def count(self, nbytes: int, p: int, elem_size: int) -> int:
        return nbytes // elem_size

    def prepare(self, ctx: Context, count: int, place: str) -> Prepared:
        buf = ctx.empty(count)
        buf.fill_(1.0)
        p = ctx.size

        def run() -> None:
            ctx.dist.all_reduce(buf, group=ctx.group)

        def fill() -> None:
            buf.fill_(float(ctx.rank + 1))

        def check() -> float:
            expected = float(p * (p + 1) // 2)
            return float((buf.double() - expected).abs().max().item()) if count else 0.0

        return Prepared(run, fill, check)


COLLECTIVE = AllReduce()
