"""The in-run noisy-neighbour measure: CPU used by the rest of the machine while a measurement ran
(busy time less our own and our waited-for children's), and the hypervisor's steal."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from stallscope.comm._neighbour import CpuSample, cpu_sample, others_during


def test_others_is_busy_time_less_ours_per_second_plus_steal() -> None:
    a = CpuSample(wall_s=10.0, busy_s=100.0, steal_s=5.0, ours_s=20.0)
    quiet = CpuSample(wall_s=12.0, busy_s=103.9, steal_s=5.02, ours_s=23.8)  # 0.1 s others in 2 s
    r = others_during(a, quiet)
    assert r.others_cores == pytest.approx(0.05)
    assert r.steal_cores == pytest.approx(0.01)
    assert r.ok
    noisy = CpuSample(wall_s=12.0, busy_s=105.8, steal_s=5.0, ours_s=23.8)  # 2 s others in 2 s
    assert others_during(a, noisy).others_cores == pytest.approx(1.0)
    assert not others_during(a, noisy).ok
    stolen = CpuSample(wall_s=12.0, busy_s=103.8, steal_s=5.4, ours_s=23.8)
    assert not others_during(a, stolen).ok  # the hypervisor's steal counts too
    assert others_during(a, noisy, limit=1.5).ok


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc/stat")
def test_a_busy_process_that_is_not_ours_is_counted() -> None:
    spin = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass\n"
    p = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.3)  # started and spinning; not waited for, so not our CPU time yet
        a = cpu_sample()
        time.sleep(0.8)
        b = cpu_sample()
    finally:
        p.kill()
        p.wait(timeout=10)
    assert a is not None and b is not None
    assert others_during(a, b).others_cores > 0.4  # about one core, less on a loaded machine
