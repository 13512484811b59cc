"""Predict a training job's step time and stalls on configurations never run.

    profile = stallscope.predict.profile_of("runs/ddp")     # a measured run -> Profile
    profile.save("ddp.profile.json")                         # readable, editable JSON

The engine (`_engine`) simulates one step per rank class: tasks on in-order streams with
dependencies; its timeline goes through the stall table's attribution.

The sourced tables it stands on ship in ``data/``: ``device(name)`` / ``devices()`` (peaks per
precision, memory, bandwidth, the link each device ships with) and ``link(name)`` / ``links()``
(NVLink, NVSwitch, PCIe, InfiniBand, cloud networks, Ethernet: bandwidth per direction and
latency). Every figure carries its source URL and date.
"""

from __future__ import annotations

from stallscope.predict._catalog import CatalogError, Source
from stallscope.predict._devices import PRECISIONS, Device, device, device_names, devices
from stallscope.predict._errors import PredictError, PredictWarning, ProfileError
from stallscope.predict._extract import WARMUP_RULE, profile_of
from stallscope.predict._links import Link, link, link_names, links
from stallscope.predict._profile import PROFILE_FORMAT, PROFILE_VERSION, Profile

__all__ = [
    "PRECISIONS",
    "PROFILE_FORMAT",
    "PROFILE_VERSION",
    "WARMUP_RULE",
    "CatalogError",
    "Device",
    "Link",
    "PredictError",
    "PredictWarning",
    "Profile",
    "ProfileError",
    "Source",
    "device",
    "device_names",
    "devices",
    "link",
    "link_names",
    "links",
    "profile_of",
]
