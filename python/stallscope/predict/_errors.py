"""The predictor's errors and warnings: each names the input at fault and what would work."""

from __future__ import annotations

from stallscope.exceptions import StallscopeError, StallscopeWarning


class PredictError(StallscopeError):
    """A prediction cannot be made: the run lacks what the model needs (step markers,
    collectives), the configuration is impossible, or an input file is unusable."""


class ProfileError(PredictError):
    """A profile file is missing, malformed or of another format version."""


class PredictWarning(StallscopeWarning):
    """A prediction goes beyond what its profile and link figures support (far more ranks than
    measured, message sizes outside the calibrated range), or rests on an estimate."""


#: How a measured ratio is given, as the predictor's own callers take it.
PREDICT_RATIO: str = "Target.compute_scale; `stallscope predict --compute-scale RATIO`"


class NoPeakError(PredictError):
    """A device has no sourced peak at the run's precision, so compute cannot be carried to it
    from device figures. ``advice(how)`` is the message with the way to give a measured ratio
    that the caller takes (the verb the user ran: its option, its parameter)."""

    def __init__(self, device: str, precision: str, available: tuple[str, ...]) -> None:
        self.device, self.precision, self.available = device, precision, available
        super().__init__(self.advice(PREDICT_RATIO))

    def advice(self, how: str) -> str:
        have = ", ".join(self.available) or "none"
        return (
            f"{self.device} has no sourced peak for {self.precision} (it has: {have}), so the "
            f"run's compute cannot be carried to it from device figures: give a measured ratio "
            f"of compute time on it to the run's ({how})"
        )
