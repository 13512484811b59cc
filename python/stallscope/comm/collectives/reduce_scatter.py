"""reduce_scatter (sum) of one tensor. The reported size is the whole input (p chunks). In place:
the output is this rank's chunk of the input, as in nccl-tests."""

from __future__ import annotations

from stallscope.comm.collectives._base import Context, Prepared, chunked_count


class ReduceScatter:
    name = "reduce_scatter"
    places = ("in", "out")

    def count(self, nbytes: int, p: int, elem_size: int) -> int:
        return chunked_count(nbytes, p, elem_size)

    def prepare(self, ctx: Context, count: int, place: str) -> Prepared:
        torch, p, r = ctx.torch, ctx.size, ctx.rank
        chunk = count // p
        inp = ctx.empty(count)
        inp.fill_(1.0)
        out = inp[r * chunk : (r + 1) * chunk] if place == "in" else ctx.empty(chunk)

        # torch >= 2.11 names it reduce_scatter_single (the old name warns); older: _tensor
        fn = getattr(ctx.dist, "reduce_scatter_single", None) or ctx.dist.reduce_scatter_tensor

        def run() -> None:
            fn(out, inp, group=ctx.group)

        def fill() -> None:
            # chunk j of rank r holds (r + 1) * (j + 1): rank j receives (j + 1) * p(p+1)/2
            weights = torch.arange(1, p + 1, dtype=inp.dtype, device=ctx.device) * (r + 1)
            inp.copy_(weights.repeat_interleave(chunk))

        def check() -> float:
            expected = float((r + 1) * p * (p + 1) // 2)
            return float((out.double() - expected).abs().max().item()) if chunk else 0.0

        return Prepared(run, fill, check)


COLLECTIVE = ReduceScatter()
