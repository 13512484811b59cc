"""`StepPredictor` on the predictor (`stallscope.predict`): the measured run's profile, each
shape as a `Target`.

A shape becomes Target(nodes, ranks_per_node, device, accumulation, compute_scale) with the
instance's own links: within a node the catalog's GPU-to-GPU figure (``intra_node_GBps``: an
instance may connect NVLink-capable GPUs over PCIe), across nodes its network figure
(``inter_node_gbps``, shared by the node's ranks). Compute moves to another device by the
predictor's device model: matrix kernels by the ratio of achievable matmul rates at the run's
precision (each GPU's measured best rate, its dense peak times the H100's fraction where none
was measured), the rest by memory bandwidth. A run on CPU threads has no kernels to scale: the
user names the GPU its compute stands for (``measured_device``), and other GPUs take that
compute times the ratio of their achievable matmul rates at ``precision``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl

from stallscope.analysis import STALL_COLUMNS
from stallscope.exceptions import CatalogError
from stallscope.predict import (
    PRECISIONS,
    NoPeakError,
    PredictError,
    PredictWarning,
    Profile,
    Target,
    predict,
    profile_of,
)
from stallscope.predict import device as table_device
from stallscope.predict._matmul_rates import achievable_tflops, matmul_rates, timed
from stallscope.recommend._errors import RecommendError
from stallscope.recommend._gpu_lookup import gpu_device
from stallscope.recommend._predictor_seam import PREDICTION_SCHEMA, Shape, failed

_CPU = "cpu"
#: The fraction of its dense peak a GPU without a measured matmul rate is taken to reach.
_DEFAULT_FRACTION: Final = float(matmul_rates()["default_fraction"])
_LEADING_NUMBER = re.compile(r"^(\d+) (.+)$", re.S)


class ProfilePredictor:
    """Predicts a measured profile on the recommender's shapes (module docstring)."""

    def __init__(
        self,
        profile: Profile,
        measured_device: str | None = None,
        precision: str = "fp32",
        compute_scales: Mapping[str, float] | None = None,
    ) -> None:
        self.profile = profile
        self.notes: set[str] = set()
        m = profile.measured
        self._given: dict[str, float] = {}
        for gpu, ratio in (compute_scales or {}).items():
            if not (isinstance(ratio, int | float) and 0 < ratio < float("inf")):
                raise RecommendError(
                    f"the compute ratio for {gpu} must be a positive number (compute time on "
                    f"it over the measured run's), got {ratio!r}"
                )
            self._given[_named(gpu)] = float(ratio)
        if precision not in PRECISIONS:
            raise RecommendError(
                f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}"
            )
        self._precision = precision
        self._stand_in: str | None = None
        if m.device == _CPU:
            if measured_device is None:
                raise RecommendError(
                    "the run was measured on CPU threads, whose compute the device model cannot "
                    "carry to a GPU: name the GPU its compute times stand for (--measured-device "
                    "T4, or measured_device=...), or profile the job on a GPU"
                )
            self._stand_in = _named(measured_device)
            self._device = self._stand_in
        else:
            try:
                self._device = table_device(m.device).name
            except Exception as e:  # the device table's own error names the nearest devices
                raise RecommendError(
                    f"the run's device {m.device!r} is not in the device table ({e}); set "
                    "measured.device in a saved profile to a device the table knows"
                ) from None
            if measured_device is not None and _named(measured_device) != self._device:
                raise RecommendError(
                    f"the run was measured on {self._device}; --measured-device is for runs on "
                    "CPU threads"
                )
        self._scales: dict[str, float] = {}
        # A run without gradient buckets or collectives says nothing about communication.
        self._alone = (
            ""
            if profile.buckets or profile.collectives
            else "the measured run has no gradient all-reduces or other collectives, so its "
            "communication on several GPUs is unknown: profile it on 2 or more ranks"
        )

    @property
    def measured_ranks(self) -> int:
        return self.profile.measured.ranks

    @property
    def predictor_notes(self) -> list[str]:
        """The predictor's notes; those that differ only in the number they start with (a rank
        count) as one, with the range."""
        groups: dict[str, list[int]] = {}
        out: list[str] = []
        for note in sorted(self.notes):
            m = _LEADING_NUMBER.match(note)
            if m:
                groups.setdefault(m.group(2), []).append(int(m.group(1)))
            else:
                out.append(note)
        for rest, nums in sorted(groups.items()):
            lo, hi = min(nums), max(nums)
            out.append(f"{lo} {rest}" if lo == hi else f"{lo} to {hi} {rest}")
        return out

    @property
    def measured_device(self) -> str:
        return self._device

    @property
    def basis(self) -> str:
        given = ""
        if self._given:
            ratios = ", ".join(f"{d} x{r:g}" for d, r in sorted(self._given.items()))
            given = f"; measured compute ratios as given: {ratios}"
        if self._stand_in is not None:
            return (
                f"the run's compute on CPU threads stands for {self._stand_in}'s (as given); "
                f"another GPU takes it times the ratio of achievable {self._precision} matmul "
                f"rates (measured best rates; dense peak x {_DEFAULT_FRACTION:g} where none)"
                f"{given}"
            )
        return (
            f"measured on {self._device}; on another GPU matrix kernels scale with achievable "
            "matmul rates at the run's precision (measured best rates; dense peak x "
            f"{_DEFAULT_FRACTION:g} where none) and the others with memory bandwidth (the "
            f"predictor's device model){given}"
        )

    def _rate(self, name: str) -> float:
        """TFLOP/s ``name``'s matrix kernels reach at the run's precision."""
        d = table_device(name)
        if not timed(d, self._precision):
            other = "; or choose a precision it has (--precision)" if d.peak_tflops else ""
            raise RecommendError(
                NoPeakError(d.name, f"dense {self._precision}", tuple(d.peak_tflops)).advice(
                    ratio_option(d.name)
                )
                + other
            )
        return achievable_tflops(d, self._precision)

    def compute_scale(self, device: str) -> float:
        got = self._scales.get(device) or self._given.get(device)
        if got is not None:
            return got
        if self._stand_in is not None:
            got = self._rate(self._stand_in) / self._rate(device)
        else:
            try:
                frame = self._predict([Target(1, 1), Target(1, 1, device=device)])
            except NoPeakError as e:
                raise RecommendError(e.advice(ratio_option(e.device))) from None
            base, there = frame["compute_ns"].to_list()
            if not base:
                raise RecommendError("the profile has no compute to scale")
            got = float(there) / float(base)
        self._scales[device] = got
        return got

    def _target(self, s: Shape) -> Target:
        scale = s.compute_scale
        if scale is None and (self._stand_in is not None or s.device in self._given):
            scale = self.compute_scale(s.device)
        return Target(
            nodes=s.nodes,
            ranks_per_node=s.ranks_per_node,
            intra_node_GBps=s.intra_node_GBps if s.ranks_per_node > 1 else None,
            inter_node_gbps=s.network_gbps if s.nodes > 1 else None,
            device=s.device,
            compute_scale=scale,
            accumulation=s.accumulation,
        )

    def _predict(self, targets: Sequence[Target]) -> pl.DataFrame:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PredictWarning)
            frame = predict(self.profile, list(targets))
        for w in caught:
            if issubclass(w.category, PredictWarning):
                self.notes.add(str(w.message))  # shown with the recommendation's notes
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return frame

    def predict(self, shapes: Sequence[Shape]) -> pl.DataFrame:
        """One row per shape (PREDICTION_SCHEMA); a device the predictor cannot scale to, or
        a shape it cannot predict, gets its reason instead of figures."""
        parts: list[pl.DataFrame] = []
        order: list[int] = []
        by_device: dict[str, list[int]] = {}
        for i, s in enumerate(shapes):
            by_device.setdefault(s.device, []).append(i)
        for idx in by_device.values():
            parts.append(self._group([shapes[i] for i in idx]))
            order.extend(idx)
        out = (
            pl.concat(parts, how="vertical")
            .with_columns(_at=pl.Series(order))
            .sort("_at")
            .drop("_at")
            if parts
            else pl.DataFrame(schema=PREDICTION_SCHEMA)
        )
        return out

    def _group(self, shapes: list[Shape]) -> pl.DataFrame:
        """Shapes of one device in one call; if it fails, one call each, so one bad shape
        does not take the others with it."""
        if self._alone and any(s.ranks > 1 for s in shapes):
            one = [s for s in shapes if s.ranks == 1]
            got = self._group(one).iter_slices(1) if one else iter(())
            lone = failed(self._alone)
            return pl.concat([next(got) if s.ranks == 1 else lone for s in shapes])
        try:
            return self._rows([self._target(s) for s in shapes])
        except NoPeakError as e:  # the way to fix it that this verb takes
            if len(shapes) == 1:
                return failed(e.advice(ratio_option(e.device)))
        except (PredictError, RecommendError) as e:
            if len(shapes) == 1:
                return failed(str(e))
        return pl.concat([self._group([s]) for s in shapes], how="vertical")

    def _rows(self, targets: list[Target]) -> pl.DataFrame:
        frame = self._predict(targets)
        return frame.select(
            pl.col("step_ns").cast(pl.Float64),
            *(pl.col(c).cast(pl.Float64) for c in STALL_COLUMNS),
            layout=pl.lit(None, dtype=pl.String),
            problem=pl.lit(None, dtype=pl.String),
        )


def _named(spelling: str) -> str:
    """The device table's name for the measured device the user gave."""
    try:
        return gpu_device(spelling).name
    except CatalogError as e:
        raise RecommendError(f"measured device: {e}") from None


def ratio_option(device: str) -> str:
    """How a recommend user gives a measured compute ratio for ``device``."""
    return (
        f"`stallscope recommend --compute-scale {device}=RATIO`, or "
        f"compute_scales={{{device!r}: RATIO}} in Python"
    )


def predictor_for(
    run: Any,
    measured_device: str | None = None,
    precision: str = "fp32",
    compute_scales: Mapping[str, float] | None = None,
    measured_network: str | None = None,
) -> ProfilePredictor:
    """A predictor of the measured job ``run``: a run directory, Kineto traces (a folder, a
    file or several), a saved profile file, or a `stallscope.predict.Profile`.
    ``compute_scales``: per GPU, a measured ratio of compute time on it to the run's (wins over
    the device model). ``measured_network``: the link-table name of the measured cluster's
    network (needed when a multi-node run's collectives lack payload sizes)."""
    if isinstance(run, Profile):
        profile = run
    else:
        paths = [run] if isinstance(run, (str, Path)) else list(run)
        profile = profile_of(paths[0] if len(paths) == 1 else paths)
    if measured_network:
        profile.measured.network = measured_network
    return ProfilePredictor(profile, measured_device, precision, compute_scales)
