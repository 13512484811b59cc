"""HTA's communication / computation overlap (docs/hta-compatibility.md section 4): per rank,
the share of the (merged) communication kernel time during which a computation kernel also
runs."""

from __future__ import annotations

import numpy as np
import polars as pl

from stallscope._utils import arrow as _arrow
from stallscope._utils.gil import fair_gil
from stallscope._utils.sorted import distinct
from stallscope.analysis.hta._loading import hta_arrays, merge_by_type, sweep
from stallscope.analysis.hta._temporal import hta_pct


@fair_gil
def comm_comp_overlap(events: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """One row per rank: rank, overlap_ns (time with communication and computation kernels both
    running), comm_time_ns (merged communication time), overlap_pct (HTA's
    comp_comm_overlap_pctg; NaN when the rank ran no communication kernel)."""
    rows = hta_arrays(events, gpu_only=True)
    ranks = distinct(rows.rank[rows.gpu()])
    # Bit 0 communication, bit 1 computation: ties sort communication first, as HTA's
    # concatenation of the two boundary lists.
    m_rank, m_k, m_ts, m_end = merge_by_type(rows, ("COMMUNICATION", "COMPUTATION"))
    rank, label, dur = sweep(m_rank, m_k, m_ts, m_end)
    both = label == 3
    at = np.searchsorted(ranks, rank[both])
    overlap = np.bincount(at, weights=dur[both], minlength=ranks.size)
    comm = m_k == 0
    at = np.searchsorted(ranks, m_rank[comm])
    comm_time = np.bincount(at, weights=(m_end - m_ts)[comm], minlength=ranks.size)
    return pl.DataFrame(
        [
            _arrow.series(ranks, "rank", pl.Int32),
            _arrow.series(np.round(overlap * 1000.0), "overlap_ns", pl.Int64),
            _arrow.series(np.round(comm_time * 1000.0), "comm_time_ns", pl.Int64),
            _arrow.series(hta_pct(overlap, comm_time), "overlap_pct", pl.Float64),
        ]
    )
