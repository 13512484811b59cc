"""Emulate several machines on one with network namespaces, veth pairs, a bridge and tc tbf
shaping, and launch a command on every rank with the rendezvous environment set. Needs root and
iproute2. See stallscope.testbed._testbed for the layout and the clean-up guarantees."""

from __future__ import annotations

from stallscope.testbed._net import (
    ALLOWED_NET,
    NAME_PREFIX,
    TestbedError,
    list_namespaces,
    parse_rate,
    require_privileges,
    sweep_stale,
)
from stallscope.testbed._testbed import Node, RunResult, Testbed

__all__ = [
    "ALLOWED_NET",
    "NAME_PREFIX",
    "Node",
    "RunResult",
    "Testbed",
    "TestbedError",
    "list_namespaces",
    "parse_rate",
    "require_privileges",
    "sweep_stale",
]
