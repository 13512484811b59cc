"""The NCCL plugin's counters in run.json: each trace reports its own recorded and lost
operations (the plugin counts for the whole process), and a lost operation is a counted drop
that `run_info` names, never a silent one. Driven through the ABI under a one-rank gloo group,
so the torch.distributed backend runs as it does around NCCL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import stallscope

pytestmark = pytest.mark.torch

_SCRIPT = """
import ctypes, os, sys
sys.path.insert(0, {helper!r})
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT={port!r}, RANK="0", WORLD_SIZE="1")
import torch.distributed as dist
import stallscope, stallscope.torch
from stallscope.torch._nccl import plugin_path
from nccl_abi import Plugin
dist.init_process_group("gloo")
stallscope.torch.instrument(None)
p = Plugin(ctypes.CDLL(str(plugin_path())), 5)
_, ctx, _ = p.init("world", 0xABC, 1, 1, 0)
# trace 1: 3 operations, all recorded
with stallscope.trace({first!r}):
    for seq in range(3):
        p.stop(p.start(ctx, p.coll(0, 0, seq, b"AllReduce", 64, b"ncclFloat32")))
# trace 2: 4097 started before any stopped: the plugin keeps 4096 in flight per communicator,
# so the first one's slot is taken again and that operation is lost; the others stop, and the
# flush at the trace's stop writes them
with stallscope.trace({second!r}):
    handles = [p.start(ctx, p.coll(0, 0, seq, b"AllGather", 64, b"ncclFloat32"))
               for seq in range(4097)]
    for h in handles[1:]:
        p.stop(h)
p.finalize(ctx)
dist.destroy_process_group()
"""


def _plugin(run: Path) -> dict[str, int]:
    doc = json.loads((run / "run.json").read_text())
    (proc,) = doc["processes"].values()
    return proc["backends"]["torch_dist"]


def test_each_trace_counts_its_own_plugin_operations_and_losses(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    code = _SCRIPT.format(
        helper=str(Path(__file__).parent),
        port=str(29400 + (hash(str(tmp_path)) % 500)),
        first=str(first),
        second=str(second),
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    one, two = _plugin(first), _plugin(second)
    assert one["nccl_plugin"]["recorded"] == 3
    assert one["nccl_plugin"]["lost"] == 0
    assert one["drops"] == {"nccl_plugin_lost": 0}
    assert stallscope.run_info(first).problems == []
    # the second trace: not the process's running totals, only its own
    assert two["nccl_plugin"]["lost"] == 1
    assert two["nccl_plugin"]["recorded"] == 4096, two
    assert two["drops"] == {"nccl_plugin_lost": 1}
    info = stallscope.run_info(second)
    assert info.drop_causes == {"rank-00000": {"torch_dist.nccl_plugin_lost": 1}}
    (problem,) = info.problems
    assert "torch_dist.nccl_plugin_lost 1 (NCCL operations the profiler plugin could not" in problem
