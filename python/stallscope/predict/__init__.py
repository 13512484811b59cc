"""Predict a training job's step time and stalls on configurations never run.

    import stallscope.predict as sp
    profile = sp.profile_of("runs/ddp")                  # a measured run -> Profile
    profile.save("ddp.profile.json")                      # readable, editable JSON
    frame = sp.sweep(profile, nodes=[2, 4], ranks_per_node=[1, 2], rates_bps=[1e9, 200e6],
                     calibration="cal.json")              # one row per configuration
    sp.compare(frame[0], "runs/ddp-2x1")                  # prediction vs measured, per column

The profile (_extract) summarises the measured step; the communication model (_comm) prices
collectives per link tier; the DDP and FSDP step graphs (_ddp, _fsdp) run on the event engine
(_engine) per rank class, and its timeline goes through the stall table's attribution, so a
prediction has the stall table's columns. docs/predict.md has the method and its limits.

The sourced tables it stands on ship in ``data/``: ``device(name)`` / ``devices()`` (peaks per
precision, memory, bandwidth, the link each device ships with) and ``link(name)`` / ``links()``
(NVLink, NVSwitch, PCIe, InfiniBand, cloud networks, Ethernet: bandwidth per direction and
latency). Every figure carries its source URL and date.
"""

from __future__ import annotations

from stallscope.predict._catalog import CatalogError, Source
from stallscope.predict._compare import compare, measured_step
from stallscope.predict._devices import PRECISIONS, Device, device, device_names, devices
from stallscope.predict._errors import NoPeakError, PredictError, PredictWarning, ProfileError
from stallscope.predict._extract import WARMUP_RULE, profile_of
from stallscope.predict._links import Link, link, link_names, links
from stallscope.predict._predict import Prediction, predict, prediction, sweep
from stallscope.predict._profile import PROFILE_FORMAT, PROFILE_VERSION, Profile
from stallscope.predict._target import Target

__all__ = [
    "PRECISIONS",
    "PROFILE_FORMAT",
    "PROFILE_VERSION",
    "WARMUP_RULE",
    "CatalogError",
    "Device",
    "Link",
    "NoPeakError",
    "PredictError",
    "PredictWarning",
    "Prediction",
    "Profile",
    "ProfileError",
    "Source",
    "Target",
    "compare",
    "device",
    "device_names",
    "devices",
    "link",
    "link_names",
    "links",
    "measured_step",
    "predict",
    "prediction",
    "profile_of",
    "sweep",
]
