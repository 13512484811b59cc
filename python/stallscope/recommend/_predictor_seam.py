"""The one place the recommender meets the predictor: for a measured job and a hardware shape
(a device, nodes x ranks per node, the links between them), the predicted step time and its
stall columns.

The optimiser depends only on `StepPredictor`; `ProfilePredictor` implements it with
`stallscope.predict`, and tests give it a deterministic stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import polars as pl

from stallscope.analysis import STALL_COLUMNS

#: Columns of `StepPredictor.predict`: one row per shape, in the order given. ``layout`` is
#: the parallel configuration the predictor chose for the shape (the planner's label, e.g.
#: "tp4.pp2.dp8.mb1.rc-none.sp.z1"), null where the shape runs the measured job's own.
#: ``problem`` is null where the shape was predicted, else why it could not be (the step
#: columns are null).
PREDICTION_SCHEMA: dict[str, pl.DataType] = {
    "step_ns": pl.Float64(),
    **{c: pl.Float64() for c in STALL_COLUMNS},
    "layout": pl.String(),
    "problem": pl.String(),
}


@dataclass(frozen=True)
class Shape:
    """Hardware to predict the measured job on. ``device``: a device table name.
    ``intra_node_GBps``: GPU to GPU inside a node, GB/s per direction; ``network_gbps``: each
    node's network, Gbit/s (None: unknown, only for one node). ``accumulation``: micro-batches
    per rank per step. ``compute_scale``: compute time on this shape over the measured one,
    when given (a heterogeneous mix: the combined rate of its devices); None: the device's own
    ratio from the device model."""

    device: str
    nodes: int
    ranks_per_node: int
    intra_node_GBps: float  # noqa: N815 (unit suffix, as the catalog's column)
    network_gbps: float | None
    accumulation: int = 1
    compute_scale: float | None = None

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node


@runtime_checkable
class StepPredictor(Protocol):
    """What the recommender asks of a predictor."""

    @property
    def measured_ranks(self) -> int:
        """Ranks of the measured run."""
        ...

    @property
    def measured_device(self) -> str:
        """The device the measured compute times are on (a device table name)."""
        ...

    @property
    def basis(self) -> str:
        """How compute time is carried from the measured device to another, in one line."""
        ...

    @property
    def predictor_notes(self) -> list[str]:
        """What the predictions so far rest on or reach beyond (the predictor's warnings)."""
        ...

    def compute_scale(self, device: str) -> float:
        """Compute time on one `device` over the measured one (RecommendError when the device
        model cannot say)."""
        ...

    def predict(self, shapes: Sequence[Shape]) -> pl.DataFrame:
        """PREDICTION_SCHEMA rows, one per shape."""
        ...


def failed(problem: str, n: int = 1) -> pl.DataFrame:
    """``n`` prediction rows that could not be made, for ``problem``."""
    rows: dict[str, list[str | None]] = {c: [None] * n for c in PREDICTION_SCHEMA}
    rows["problem"] = [problem] * n
    return pl.DataFrame(rows, schema=PREDICTION_SCHEMA)
