"""The CPUs stallscope sizes its threads by: the affinity mask capped by the cgroup CPU quota
(a container's CPU limit), read from cgroup v2 (`cpu.max`) or v1 (`cpu.cfs_quota_us` /
`cpu.cfs_period_us`), the tightest along the process's cgroup path; fake cgroup trees here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stallscope._utils import cpus as _cpus
from stallscope._utils.cpus import cgroup_cpu_quota, usable_cpus
from stallscope.io.kineto import _native_read


def _tree(tmp_path: Path, self_cgroup: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    root.mkdir()
    for rel, text in files.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    proc = tmp_path / "self_cgroup"
    proc.write_text(self_cgroup)
    return root, proc


def test_v2_quota_at_the_root_of_a_container(tmp_path: Path) -> None:
    # A cgroup namespace shows the container's own cgroup as "/": its limit is at the mount.
    root, proc = _tree(tmp_path, "0::/\n", {"cpu.max": "400000 100000\n"})
    assert cgroup_cpu_quota(root, proc) == 4.0


def test_v2_the_tightest_limit_along_the_path_counts(tmp_path: Path) -> None:
    files = {
        "cpu.max": "max 100000\n",
        "kubepods/cpu.max": "max 100000\n",
        "kubepods/pod1/cpu.max": "250000 100000\n",  # the pod's limit: 2.5 CPUs
        "kubepods/pod1/c1/cpu.max": "max 100000\n",
    }
    root, proc = _tree(tmp_path, "0::/kubepods/pod1/c1\n", files)
    assert cgroup_cpu_quota(root, proc) == 2.5


def test_v1_quota_under_the_cpu_controller(tmp_path: Path) -> None:
    files = {
        "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",  # the host: none
        "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "150000\n",
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
    }
    self_cgroup = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n"
    root, proc = _tree(tmp_path, self_cgroup, files)
    assert cgroup_cpu_quota(root, proc) == 1.5


@pytest.mark.parametrize(
    ("self_cgroup", "files"),
    [
        ("0::/\n", {"cpu.max": "max 100000\n"}),  # v2 without a limit
        ("2:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}),
        ("0::/\n", {}),  # no cpu controller files
        ("0::/\n", {"cpu.max": "garbage\n"}),
        ("not a cgroup line\n", {"cpu.max": "100000 100000\n"}),
    ],
)
def test_no_quota(tmp_path: Path, self_cgroup: str, files: dict[str, str]) -> None:
    root, proc = _tree(tmp_path, self_cgroup, files)
    assert cgroup_cpu_quota(root, proc) is None


def test_no_cgroups_at_all(tmp_path: Path) -> None:
    assert cgroup_cpu_quota(tmp_path / "none", tmp_path / "no_self_cgroup") is None


def test_the_quota_caps_the_cores_the_importer_sizes_its_threads_by(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setattr(_cpus, "QUOTA", None)
    assert usable_cpus() == cores
    monkeypatch.setattr(_cpus, "QUOTA", 0.5)  # half a CPU: still one thread
    assert usable_cpus() == 1
    monkeypatch.setattr(_cpus, "QUOTA", cores + 0.5)  # more than the cores: the cores
    assert usable_cpus() == cores
    monkeypatch.setattr(_cpus, "QUOTA", 1.5)
    assert usable_cpus() == min(cores, 2)
    assert _native_read._cores() == min(cores, 2)
