"""all_to_all of one tensor split in p equal chunks (all_to_all_single). The reported size is the
whole send buffer. Out of place only: torch gives no in-place variant."""

from __future__ import annotations

from stallscope.comm.collectives._base import Context, Prepared, chunked_count, max_deviation


class AllToAll:
    name = "all_to_all"
    places = ("out",)

    def count(self, nbytes: int, p: int, elem_size: int) -> int:
        return chunked_count(nbytes, p, elem_size)

    def prepare(self, ctx: Context, count: int, place: str) -> Prepared:
        torch, p, r = ctx.torch, ctx.size, ctx.rank
        chunk = count // p
        inp = ctx.empty(count)
        inp.fill_(1.0)
        out = ctx.empty(count)

        def run() -> None:
            ctx.dist.all_to_all_single(out, inp, group=ctx.group)

        def fill() -> None:
            # chunk j (sent to rank j) holds r * p + j; chunk i received from rank i is i * p + r
            vals = torch.arange(p, dtype=inp.dtype, device=ctx.device) + float(r * p)
            inp.copy_(vals.repeat_interleave(chunk))
            out.zero_()

        def check() -> float:
            expected = (
                torch.arange(p, dtype=torch.float64, device=ctx.device) * p + r
            ).repeat_interleave(chunk)
            return max_deviation(torch, out, expected)

        return Prepared(run, fill, check)


COLLECTIVE = AllToAll()
