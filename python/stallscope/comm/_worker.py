"""One rank of ``stallscope bench comm``: join the process group, run the sweep, return the report.

Runs in-process under torchrun or the test bed (the rendezvous environment is set), or as a child
of the local launcher (``python -m stallscope.comm._worker CONFIG OUT``).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

import orjson

from stallscope.comm._harness import Layout, Row, SweepConfig, run_sweep

REPORT_FORMAT = "stallscope.comm.bench"
REPORT_VERSION = 1


def _device_and_backend(torch: Any, backend: str) -> tuple[Any, str]:
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise RuntimeError(
                "backend nccl needs a CUDA GPU; none is visible (use --backend gloo)"
            )
        local = int(os.environ.get("LOCAL_RANK", "0"))
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        return dev, backend
    return torch.device("cpu"), backend


def run_worker(cfg: SweepConfig, on_row: Any = None) -> dict[str, Any] | None:
    """Run one rank. Returns the report on global rank 0, None elsewhere."""
    from stallscope.capture._env import placement

    cfg.validate()
    try:
        import torch
    except ImportError:
        raise RuntimeError(
            "stallscope bench comm needs PyTorch: pip install 'stallscope[torch]' "
            "(on a CPU-only machine: pip install torch==2.13.0)"
        ) from None
    import torch.distributed as dist

    torch.set_num_threads(1)  # 2-core machines: keep each rank to one compute thread
    device, backend = _device_and_backend(torch, cfg.backend)
    created = False
    if not dist.is_initialized():
        for var in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            if var not in os.environ:
                raise RuntimeError(
                    f"{var} is not set: run under torchrun / `stallscope testbed`, or give --nprocs"
                )
        kwargs: dict[str, Any] = {"timeout": _dt.timedelta(seconds=cfg.timeout_s)}
        if backend == "nccl":
            kwargs["device_id"] = device
        dist.init_process_group(backend, **kwargs)
        created = True
    try:
        me = placement()
        nodes: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(nodes, (me.node_rank, socket.gethostname()))
        # Node ids from the launcher's node rank; hostnames break ties when it is absent.
        keys = sorted(set(nodes), key=nodes.index)
        layout = Layout([keys.index(n) for n in nodes])
        rows = run_sweep(cfg, layout, torch, device, on_row=on_row)
        if dist.get_rank() != 0:
            return None
        return make_report(cfg, layout, rows, backend, torch)
    finally:
        if created:
            dist.destroy_process_group()


def make_report(
    cfg: SweepConfig, layout: Layout, rows: list[Row], backend: str, torch: Any
) -> dict[str, Any]:
    from dataclasses import asdict

    per_node: dict[int, int] = {}
    for n in layout.nodes:
        per_node[n] = per_node.get(n, 0) + 1
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "backend": backend,
        "world_size": len(layout.nodes),
        "nnodes": layout.nnodes,
        "ranks_per_node": sorted(set(per_node.values())),
        "config": cfg.to_dict(),
        "link": _testbed_link(),
        "results": [asdict(r) for r in rows],
    }


def _testbed_link() -> dict[str, Any] | None:
    """The shaped link this rank runs on under `stallscope testbed` (rate in bits/s, None when
    unshaped; MTU), else None: a calibration then cannot be rescaled to another rate."""
    rate = os.environ.get("STALLSCOPE_TESTBED_RATE")
    if rate is None:
        return None
    from stallscope.testbed._net import parse_rate

    mtu = os.environ.get("STALLSCOPE_TESTBED_MTU", "")
    return {
        "rate_bps": None if rate == "none" else parse_rate(rate),
        "rate": rate,
        "mtu": int(mtu) if mtu.isdigit() else None,
        "source": "stallscope testbed",
    }


def main(argv: list[str]) -> int:
    """Child entry of the local launcher: argv = [config.json, report.json]."""
    if len(argv) != 2:
        print("usage: python -m stallscope.comm._worker CONFIG.json REPORT.json", file=sys.stderr)
        return 2
    cfg = SweepConfig.from_dict(orjson.loads(Path(argv[0]).read_bytes()))
    report = run_worker(cfg)
    if report is not None:
        Path(argv[1]).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
