"""The GPU names an instance catalog may use, and how other spellings map onto them.

A catalog names each GPU model once ("A100", "H100", "L40S") and gives its memory in its own
column, so "A100-80GB" is the A100 with 80 GB. Variants that are a different part (the H100 in
PCIe or NVL form) keep a name of their own; the family of a name is the part before its first
"-", and a filter for the family ("H100") selects every variant.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# The canonical names. NVIDIA data-centre parts first, then workstation parts sold by GPU clouds,
# then AMD's.
KNOWN_GPUS: tuple[str, ...] = (
    "K80",
    "P4",
    "P100",
    "T4",
    "V100",
    "A10",
    "A10G",
    "A40",
    "A100",
    "L4",
    "L40",
    "L40S",
    "H100",
    "H100-PCIe",
    "H100-NVL",
    "H200",
    "GH200",
    "B200",
    "GB200",
    "RTX6000",
    "A6000",
    "MI300X",
)

_CANONICAL = {name.upper(): name for name in KNOWN_GPUS}

# Other spellings (already upper-cased, "_" and " " turned into "-") of a canonical name.
_ALIASES = {
    "A100-SXM": "A100",
    "A100-SXM4": "A100",
    "A100-PCIE": "A100",
    "H100-SXM": "H100",
    "H100-SXM5": "H100",
    "H100-MEGA": "H100",
    "H100-NVLINK": "H100",
    "H200-SXM": "H200",
    "B200-SXM": "B200",
    "B200-SXM6": "B200",
    "RTX-A6000": "A6000",
    "RTXA6000": "A6000",
    "RTX-6000": "RTX6000",
    "QUADRO-RTX-6000": "RTX6000",
}

_MEMORY_SUFFIX = re.compile(r"-(\d+(?:\.\d+)?)GB$")
_VENDOR_PREFIXES = ("NVIDIA-", "TESLA-", "AMD-", "INSTINCT-")


class GpuName(NamedTuple):
    """A resolved GPU name: the canonical name and, when the spelling carried it ("A100-80GB"),
    the memory per GPU in GB."""

    name: str
    memory_gb: float | None


def resolve_gpu(spelling: str) -> GpuName | None:
    """The canonical name (and memory, if the spelling gives it) of `spelling`, or None when it
    names no GPU this module knows. Case, "_" or " " for "-", an "NVIDIA"/"Tesla" prefix and a
    "-<n>GB" suffix do not matter."""
    s = "-".join(spelling.strip().upper().replace("_", " ").replace("-", " ").split())
    memory: float | None = None
    m = _MEMORY_SUFFIX.search(s)
    if m:
        memory = float(m.group(1))
        s = s[: m.start()]
    for prefix in _VENDOR_PREFIXES:
        if s.startswith(prefix):
            s = s[len(prefix) :]
    name = _CANONICAL.get(s) or _ALIASES.get(s)
    return None if name is None else GpuName(name, memory)


def gpu_family(name: str) -> str:
    """The family of a canonical name: "H100" for "H100-PCIe", the name itself otherwise."""
    return name.split("-", 1)[0]


def known_gpus_text() -> str:
    """The canonical names as one line, for error messages."""
    return ", ".join(KNOWN_GPUS)
