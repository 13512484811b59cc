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
