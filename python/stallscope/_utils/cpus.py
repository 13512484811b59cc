"""CPUs this process may use: the cores it may run on (affinity), capped by its cgroup's CPU
quota. In a container with a CPU limit (a Kubernetes pod's `limits.cpu`, `docker --cpus`) the
affinity still lists every core of the host: the Kineto importer sized its threads by it (a
reader pair per file, a converting thread per file), and a 4-CPU pod on a 64-core node ran 64
threads on 4 CPUs' worth of time, throttled by the kernel at each period's end."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")
_SELF = Path("/proc/self/cgroup")


def usable_cpus() -> int:
    """min(cores in the affinity mask, this process's cgroup CPU quota rounded up), at least 1.
    The quota is read once, when this module is imported (75 µs: an import's thread sizing asks
    three times)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    if QUOTA is not None:
        cores = min(cores, math.ceil(QUOTA))
    return max(1, cores)


def cgroup_cpu_quota(root: Path = _ROOT, self_cgroup: Path = _SELF) -> float | None:
    """CPUs' worth of time per period that this process's cgroups allow (quota / period), the
    tightest along each cgroup's path from the mount to its own directory; None without a quota
    (or without cgroups: not Linux, nothing mounted, unreadable files)."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    found: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # cgroup v2: "0::/path", limit in cpu.max ("max" or "quota period")
            for mount in (root, root / "unified"):
                found += _along(mount, path, _v2_quota)
        elif "cpu" in controllers.split(","):  # cgroup v1: cpu.cfs_quota_us / cpu.cfs_period_us
            for mount in {root / controllers, root / "cpu", root / "cpu,cpuacct"}:
                found += _along(mount, path, _v1_quota)
    return min(found) if found else None


def _along(mount: Path, path: str, quota_of: Callable[[Path], float | None]) -> list[float]:
    """quota_of(dir) for the mount and each directory down to `path` under it, where set. A
    cgroup namespace shows the process's own cgroup as "/": then only the mount is read."""
    if not mount.is_dir():
        return []
    dirs = [mount]
    for part in path.strip("/").split("/"):
        if part:
            dirs.append(dirs[-1] / part)
    return [q for d in dirs if (q := quota_of(d)) is not None]


def _v2_quota(d: Path) -> float | None:
    try:
        quota, period = (d / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return _ratio(quota, period)


def _v1_quota(d: Path) -> float | None:
    try:
        quota = (d / "cpu.cfs_quota_us").read_text().strip()
        period = (d / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None  # v1 writes -1 for no quota


# This process's cgroup CPU quota (CPUs' worth of time per period), None without one.
QUOTA: float | None = cgroup_cpu_quota()
