"""GPU names in an instance catalog, resolved through the predictor's device table
(`stallscope.predict.device`), so the catalog and the predictor speak of the same devices.

A catalog names a GPU model ("A100", "H100", "V100") and gives its memory in a column of its
own; the device table has one entry per part ("A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM",
"H100-PCIe"). A model spelling resolves to the member of its family (the part of a device
name before its first "-") with the row's memory; a spelling the table knows as a name or an
alias ("H100-PCIe", "A100-80GB") resolves to that device, whose memory must then agree.
"""

from __future__ import annotations

import re

from stallscope.exceptions import CatalogError
from stallscope.predict import CatalogError as DeviceTableError
from stallscope.predict import Device, device, device_names

_SEPARATORS = re.compile(r"[\s_\-]+")


def normalize(name: str) -> str:
    """A name as the device table compares names: lower case, spaces, "_" and "-" alike."""
    return _SEPARATORS.sub("-", name.strip().lower()).strip("-")


def gpu_family(name: str) -> str:
    """The family of a device name, normalised: "h100" for "H100-PCIe"."""
    return normalize(name).split("-", 1)[0]


def family_members(spelling: str) -> tuple[str, ...]:
    """The device names of the family `spelling` names ("H100": every H100 part); () when it
    names no family."""
    key = normalize(spelling)
    return tuple(n for n in device_names() if gpu_family(n) == key)


def known_gpus_text() -> str:
    """The device table's names as one line, for error messages."""
    return ", ".join(device_names())


def gpu_device(spelling: str, memory_gb: float | None = None) -> Device:
    """The device `spelling` stands for, given the memory per GPU in GB the catalog row gives
    (None: any): the device the table names so, else the member of the family `spelling`
    names with that memory (the first member when `memory_gb` is None). Raises CatalogError saying which devices were near, or which memory sizes the
    family has, when there is no such device."""
    try:
        named: Device | None = device(spelling)
    except DeviceTableError as e:
        named, problem = None, str(e)
    if named is not None and (memory_gb is None or named.memory_gb == memory_gb):
        return named
    members = family_members(spelling)
    if members:
        fits = [device(n) for n in members if memory_gb in (None, device(n).memory_gb)]
        if fits and (memory_gb is None or len(fits) == 1):
            return fits[0]
        sizes = ", ".join(f"{n} {device(n).memory_gb:g} GB" for n in members)
        raise CatalogError(
            f"the device table has no {spelling} part with {memory_gb:g} GB (it has {sizes}); "
            "fix the memory or name the part"
        )
    if named is not None:
        raise CatalogError(
            f"{spelling!r} is the {named.name}, which has {named.memory_gb:g} GB, not {memory_gb:g}"
        )
    raise CatalogError(f"unknown GPU {spelling!r}: {_nearest(problem)}")


def _nearest(message: str) -> str:
    """The device table's own hint ("nearest: A, B") from its error, plus every known name."""
    start = message.find("(nearest: ")
    hint = message[start + 1 : message.find(")", start)] + "; " if start >= 0 else ""
    return f"{hint}known GPUs: {known_gpus_text()}"
