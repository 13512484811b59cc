"""send/recv as in nccl-tests' sendrecv: every rank sends its buffer to the next rank of the group
and receives the previous rank's at the same time. Out of place only (separate buffers)."""

from __future__ import annotations

from stallscope.comm.collectives._base import Context, Prepared


class SendRecv:
    name = "send_recv"
    places = ("out",)

    def count(self, nbytes: int, p: int, elem_size: int) -> int:
        # torch.distributed refuses to send to oneself: nothing to measure on one rank
        return nbytes // elem_size if p >= 2 else 0

    def prepare(self, ctx: Context, count: int, place: str) -> Prepared:
        dist, p, r = ctx.dist, ctx.size, ctx.rank
        send = ctx.empty(count)
        send.fill_(1.0)
        recv = ctx.empty(count)
        nxt, prv = ctx.ranks[(r + 1) % p], ctx.ranks[(r - 1) % p]

        def run() -> None:
            ops = [
                dist.P2POp(dist.isend, send, nxt, group=ctx.group),
                dist.P2POp(dist.irecv, recv, prv, group=ctx.group),
            ]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        def fill() -> None:
            send.fill_(float(r + 1))
            recv.zero_()

        def check() -> float:
            expected = float((r - 1) % p + 1)
            return float((recv.double() - expected).abs().max().item()) if count else 0.0

        return Prepared(run, fill, check)


COLLECTIVE = SendRecv()
