"""Compute on another device: each phase's time scales per kernel class (_kernels) with the
ratio of the device figure that bounds it, from the device table (`predict._devices`), or by a
ratio the user measured (Target.compute_scale)."""

from __future__ import annotations

from stallscope.predict._errors import PredictError
from stallscope.predict._profile import PHASES, Profile
from stallscope.predict._target import Target


def device_ratios(measured: str, target: str) -> dict[str, float]:
    """Per kernel class, target time over measured time: peak FLOP/s ratio for matmul
    kernels, memory bandwidth ratio for the rest."""
    raise PredictError(
        f"scaling compute from {measured!r} to {target!r} needs the device table, which this "
        "build lacks: give a measured ratio instead (compute_scale / --compute-scale)"
    )


def phase_scales(prof: Profile, t: Target) -> dict[str, float]:
    """Multiplier of each phase's compute time on the target."""
    if t.compute_scale is not None:
        return dict.fromkeys(PHASES, t.compute_scale)
    if t.device is None or t.device == prof.measured.device:
        return dict.fromkeys(PHASES, 1.0)
    if prof.measured.device == "cpu":
        raise PredictError(
            f"the profile ran on CPU threads: their compute cannot be scaled to {t.device!r} "
            "from device figures; give a measured ratio (compute_scale / --compute-scale)"
        )
    ratios = device_ratios(prof.measured.device, t.device)
    out = dict.fromkeys(PHASES, 1.0)
    for ph in prof.phases:
        out[ph.phase] = sum(share * ratios.get(cls, 1.0) for cls, share in ph.mix.items())
    return out
