"""Instrumented torch.distributed with no trace recording: calls are counted (sequence numbers
stay equal across ranks) and nothing else; once a trace records, every call is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from dist_jobs import free_port  # type: ignore[import-not-found]

pytestmark = pytest.mark.torch

SCRIPT = """
import json, os, sys, torch, torch.distributed as dist
import stallscope, stallscope.torch
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=0, world_size=1)
stallscope.torch.instrument(None)
t = torch.ones(8)
g = dist.new_group([0])
for _ in range(3):
    dist.all_reduce(t)                      # untraced: counted only
dist.all_reduce(t, group=g)                 # another group: a count of its own
with stallscope.trace(sys.argv[1], backends=()):
    dist.all_reduce(t)                      # positional tensor, default group
    dist.all_reduce(t, dist.ReduceOp.SUM, g)  # group passed by position
    dist.all_reduce(tensor=t, async_op=True).wait()
    dist.broadcast(t, 0)
ev = stallscope.load(sys.argv[1]).filter(stallscope.load(sys.argv[1])["kind"] == "collective")
print(json.dumps(ev.select("name", "correlation", "bytes", "detail").sort("correlation").to_dicts()))
dist.destroy_process_group()
"""


def test_untraced_calls_are_counted_and_traced_calls_recorded(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "run"), str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    got = [(x["name"], x["detail"].split(";")[0], x["correlation"], "async=1" in x["detail"])
           for x in rows]  # fmt: skip
    # the default group (pg0): 3 untraced calls, then 3, 4 (async), 5 (broadcast); the new
    # group (pg1, passed by position): 1 untraced call, then 1
    assert sorted(got, key=lambda x: (x[1], x[2])) == [
        ("all_reduce", "group=pg0", 3, False),
        ("all_reduce", "group=pg0", 4, True),
        ("broadcast", "group=pg0", 5, False),
        ("all_reduce", "group=pg1", 1, False),
    ]
    assert all(x["bytes"] == 32 for x in rows)  # 8 floats
