"""Compute on another device: each phase's time scales per kernel class (_kernels) with the
ratio of the device figure that bounds it, from the device table (``device(name)``), or by a
ratio the user measured (Target.compute_scale).

matmul kernels: the measured device's achievable matmul rate over the target's, at the
profile's precision (the precision most of its matrix-kernel time ran in): each GPU's measured
best rate (``_matmul_rates``: a 72 W L4 reaches 59 % of its peak, an H100 SXM 80 %), its dense
peak times the H100's fraction where none was measured. A target without that precision runs
the nearest it has: TF32 code as FP32 (no TF32 tensor cores), BF16 and FP8 as FP16.
memory kernels (elementwise, reductions, copies): memory bandwidth ratio.
Idle gaps, data and host time do not scale (the host launches at its own pace).
"""

from __future__ import annotations

from typing import Final

from stallscope.predict._catalog import CatalogError
from stallscope.predict._devices import Device, device
from stallscope.predict._errors import PREDICT_RATIO, NoPeakError, PredictError
from stallscope.predict._matmul_rates import achievable_tflops, timed
from stallscope.predict._profile import PHASES, Profile
from stallscope.predict._target import Target

#: The precision a device without a figure for the profile's runs instead.
FALLBACK: Final = {
    "tf32": "fp32",
    "bf16": "fp16",
    "fp8": "fp16",
    "fp4": "fp8",  # a GPU without FP4 tensor cores trains such a model in FP8
    "fp64_tensor": "fp64",
}
#: Assumed where the profile's kernels name no precision.
DEFAULT_PRECISION: Final = "fp32"


def lookup(name: str, what: str) -> Device:
    """A device of the table; PredictError with the nearest names when unknown."""
    try:
        return device(name)
    except CatalogError as e:
        raise PredictError(f"{what}: {e}") from None


def run_precision(d: Device, precision: str) -> str:
    """The precision ``d`` runs ``precision``'s matrix kernels in (FALLBACK): one it has a peak
    or a measured matmul rate for (``timed``); NoPeakError if none."""
    p = precision
    while not timed(d, p) and p in FALLBACK:
        p = FALLBACK[p]
    if not timed(d, p):
        raise NoPeakError(d.name, precision, tuple(d.peak_tflops))
    return p


def matmul_flops(d: Device, precision: str) -> float:
    """FLOP/s ``d``'s matrix kernels reach at ``precision`` (``_matmul_rates``)."""
    return achievable_tflops(d, run_precision(d, precision)) * 1e12


def device_ratios(measured: str, target: str, precision: str | None) -> dict[str, float]:
    """Per kernel class, target time over measured time (module docstring)."""
    src = lookup(
        measured,
        "the profile's device is not in the device table (set measured.device in the profile "
        f"to a known name, or give a measured ratio: {PREDICT_RATIO})",
    )
    dst = lookup(target, "unknown target device")
    prec = precision or DEFAULT_PRECISION
    return {
        "matmul": matmul_flops(src, prec) / matmul_flops(dst, prec),
        "memory": src.memory_bandwidth_bytes_per_s / dst.memory_bandwidth_bytes_per_s,
    }


def phase_scales(prof: Profile, t: Target) -> dict[str, float]:
    """Multiplier of each phase's compute time on the target."""
    if t.compute_scale is not None:
        return dict.fromkeys(PHASES, t.compute_scale)
    if t.device is None or t.device == prof.measured.device:
        return dict.fromkeys(PHASES, 1.0)
    if prof.measured.device == "cpu":
        raise PredictError(
            f"the profile ran on CPU threads: their compute cannot be scaled to {t.device!r} "
            f"from device figures; give a measured ratio ({PREDICT_RATIO})"
        )
    ratios = device_ratios(prof.measured.device, t.device, prof.measured.precision)
    out = dict.fromkeys(PHASES, 1.0)
    for ph in prof.phases:
        out[ph.phase] = sum(share * ratios.get(cls, 1.0) for cls, share in ph.mix.items())
    return out
