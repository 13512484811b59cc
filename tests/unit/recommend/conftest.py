"""A deterministic stand-in for the predictor, so the optimiser is tested on its own: compute
scales with the devices' dense fp16 peaks (the device table), gradients are all-reduced in a
ring over the slower of the node's GPU link and its network share, half hidden by compute."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from stallscope.predict import device
from stallscope.recommend._errors import RecommendError
from stallscope.recommend._predictor_seam import PREDICTION_SCHEMA, Shape


@dataclass
class FakePredictor:
    """Measured: ``measured_ranks`` ranks of ``measured_device``; per step ``compute_ns`` of
    compute per micro-batch, ``host_ns`` and ``data_ns`` that do not scale, and
    ``gradient_bytes`` all-reduced once per step."""

    measured_ranks: int = 2
    measured_device: str = "T4"
    compute_ns: float = 200e6
    host_ns: float = 5e6
    data_ns: float = 3e6
    gradient_bytes: float = 400e6
    calls: int = 0

    @property
    def basis(self) -> str:
        return "test predictor: dense fp16 peak FLOP/s ratio"

    @property
    def predictor_notes(self) -> list[str]:
        return [f"test predictor: {self.calls} call(s)"]

    def compute_scale(self, name: str) -> float:
        peak = device(name).peak_tflops.get("fp16")
        if peak is None:
            raise RecommendError(f"{name} has no sourced fp16 peak")
        return device(self.measured_device).peak_tflops["fp16"] / peak

    def one(self, s: Shape) -> dict[str, float | str | None]:
        try:
            scale = s.compute_scale if s.compute_scale is not None else self.compute_scale(s.device)
        except RecommendError as e:
            return {c: None for c in PREDICTION_SCHEMA} | {"problem": str(e)}
        compute = self.compute_ns * scale * s.accumulation
        exposed = 0.0
        if s.ranks > 1:
            link = s.intra_node_GBps * 1e9
            if s.nodes > 1:
                assert s.network_gbps is not None
                link = min(link, s.network_gbps * 1e9 / 8 / s.ranks_per_node)
            comm = 2 * (s.ranks - 1) / s.ranks * self.gradient_bytes / link * 1e9
            exposed = max(0.0, comm - 0.5 * self.compute_ns * scale)
        row: dict[str, float | str | None] = {c: 0.0 for c in PREDICTION_SCHEMA}
        row.update(
            compute_ns=compute,
            host_ns=self.host_ns,
            data_ns=self.data_ns,
            layout=None,
            problem=None,
        )
        row["network_ns" if s.nodes > 1 else "interconnect_ns"] = exposed
        row["step_ns"] = compute + exposed + self.host_ns + self.data_ns
        return row

    def predict(self, shapes: Sequence[Shape]) -> pl.DataFrame:
        self.calls += 1
        return pl.DataFrame([self.one(s) for s in shapes], schema=PREDICTION_SCHEMA, orient="row")
