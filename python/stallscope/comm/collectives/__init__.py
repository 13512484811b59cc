"""One module per benchmarked collective, all behind the ``Collective`` interface (``_base``)."""

from __future__ import annotations

from stallscope.comm.collectives import (
    all_gather,
    all_reduce,
    all_to_all,
    broadcast,
    reduce_scatter,
    send_recv,
)
from stallscope.comm.collectives._base import Collective, Context, Prepared

#: name -> implementation, in the display order of stallscope.comm._formulas.COLLECTIVES.
REGISTRY: dict[str, Collective] = {
    m.COLLECTIVE.name: m.COLLECTIVE
    for m in (all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv)
}

__all__ = ["REGISTRY", "Collective", "Context", "Prepared"]
