"""Communication that runs beside compute: what of it stays exposed, and what it costs the
compute it overlaps (SM and memory contention).

* Contention: while an SM-based collective (NCCL, Transformer Engine's userbuffers reduce-scatter)
  runs beside a kernel, that kernel slows by ``contention()`` (efficiency.json: the measured
  average slowdown of overlapped compute) for the overlapped time: a collective of c seconds
  beside compute of x seconds adds contention() x min(c, x).
* Tensor-parallel overlap (``Stack.tp_overlap``, Transformer Engine's userbuffers): the
  all-gathers run as ring exchanges chunk by chunk under the GEMMs that consume them, the
  reduce-scatters in 4 splits under the GEMMs that produce them; what the pass's GEMMs cannot
  cover, and the last split's reduce-scatter (an eighth of the layer's traffic), is exposed.
* Column-parallel backward overlap (``Stack.tp_backward_overlap``, without userbuffers): each
  column-parallel linear reduces its data gradient beside its weight-gradient GEMM, and under
  sequence parallelism gathers its input again beside its data-gradient GEMM; what a
  collective takes beyond its GEMM is exposed. The two backward GEMMs have the same FLOPs:
  each is taken as half the linear's backward. The linears are QKV and FFN-up; an MoE layer's
  FFN half moves its tokens through the dispatcher instead, so only QKV's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from stallscope.plan._gemm import efficiency_defaults

#: Splits of a GEMM whose reduce-scatter userbuffers pipeline (num_splits in the NeMo and
#: dgxc-benchmarking configurations): the last split's reduce-scatter follows the GEMM.
TP_SPLITS: Final = 4


def contention() -> float:
    """The compute slowdown while an SM-based collective overlaps it (a fraction)."""
    return float(efficiency_defaults()["comm_contention"]["value"])


def slowed(comm: float, compute: float) -> float:
    """Seconds the compute loses to a collective of ``comm`` seconds running beside it."""
    return contention() * min(comm, compute)


def tp_exposed(comm: float, gemms: float) -> float:
    """Seconds of a layer pass's tensor-parallel traffic left exposed under userbuffers
    overlap: what the pass's GEMMs cannot cover, and the last reduce-scatter split (half the
    traffic is reduce-scatter)."""
    return max(0.0, comm - gemms) + comm / (2 * TP_SPLITS)


def column_backward(reduce: float, gather: float, linears: Iterable[float]) -> tuple[float, float]:
    """(exposed, slowed) seconds of the column-parallel linears' backward collectives under
    asynchronous overlap: for each linear of ``linears`` (its backward GEMMs' seconds), the
    data gradient's ``reduce`` (all-reduce or reduce-scatter) beside the weight gradient and
    the input's ``gather`` (0 without sequence parallelism) beside the data gradient."""
    exposed = lost = 0.0
    for gemms in linears:
        half = gemms / 2
        for coll in (reduce, gather):
            exposed += max(0.0, coll - half)
            lost += slowed(coll, half)
    return exposed, lost
