"""all_gather into one tensor. The reported size is the whole output (p chunks). In place: the
input is this rank's chunk of the output, as in nccl-tests."""

from __future__ import annotations

from stallscope.comm.collectives._base import Context, Prepared, chunked_count, max_deviation


class AllGather:
    name = "all_gather"
    places = ("in", "out")

    def count(self, nbytes: int, p: int, elem_size: int) -> int:
        return chunked_count(nbytes, p, elem_size)

    def prepare(self, ctx: Context, count: int, place: str) -> Prepared:
        torch, p, r = ctx.torch, ctx.size, ctx.rank
        chunk = count // p
        out = ctx.empty(count)
        out.zero_()
        inp = out[r * chunk : (r + 1) * chunk] if place == "in" else ctx.empty(chunk)
        if place == "out":
            inp.fill_(1.0)

        # torch >= 2.11 names it all_gather_single (the old name warns); older: _into_tensor
        fn = getattr(ctx.dist, "all_gather_single", None) or ctx.dist.all_gather_into_tensor

        def run() -> None:
            fn(out, inp, group=ctx.group)

        def fill() -> None:
            out.zero_()
            inp.fill_(float(r + 1))

        def check() -> float:
            expected = torch.arange(
                1, p + 1, dtype=torch.float64, device=ctx.device
            ).repeat_interleave(chunk)
            return max_deviation(torch, out, expected)

        return Prepared(run, fill, check)


COLLECTIVE = AllGather()
