"""Skip the test-bed tests that need network namespaces where they cannot be made."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _netns_reason() -> str | None:
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"sstprobe{os.getpid()}"
    made = subprocess.run(
        ["ip", "netns", "add", probe], capture_output=True, timeout=20, check=False
    )
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.decode().strip()}"
    try:
        ran = subprocess.run(
            ["ip", "netns", "exec", probe, "true"], capture_output=True, timeout=20, check=False
        )
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=20, check=False)
    if ran.returncode != 0:
        return f"cannot run in a network namespace: {ran.stderr.decode().strip()}"
    return None


@pytest.fixture(scope="session")
def netns() -> None:
    reason = _netns_reason()
    if reason is not None:
        pytest.skip(reason)
