"""`stallscope bench comm` with NCCL on one GPU.

1. Self-communicator: one rank on the GPU, every collective (send/recv needs two ranks and is left
   out), 1 KiB .. 1 GiB, in and out of place, results checked. On one rank NCCL's collectives are
   device-local copies, so algbw measures the GPU's copy path and busbw is 0 for all-reduce (factor
   2(p-1)/p), as in nccl-tests with -g 1.
2. Two processes on the same GPU: NCCL (>= 2.5) normally refuses two ranks on one device ("Duplicate
   GPU detected"); the script tries, and records the result or NCCL's refusal verbatim.

Without a GPU it prints why and measures nothing. Results: bench/results/gpu_comm_nccl.{json,md}.
Run: python bench/gpu_comm_nccl.py [--max-bytes 1G]
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
from pathlib import Path
from typing import Any

import orjson

from stallscope.comm import COLLECTIVES, SweepConfig, launch_local, parse_size, results_frame


def gpu_or_reason() -> tuple[Any, str | None]:
    try:
        import torch
    except ImportError:
        return None, "no GPU: torch is not installed, so NCCL cannot be driven"
    if not torch.cuda.is_available():
        return torch, (
            "no GPU: torch.cuda.is_available() is False (no NVIDIA driver or device visible, or "
            f"a CPU-only torch build {torch.__version__}); nothing measured"
        )
    return torch, None


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--max-bytes", default="1G")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "gpu_comm_nccl")
    args = ap.parse_args()
    torch, reason = gpu_or_reason()
    if reason is not None:
        print(reason)
        return 0
    cfg = SweepConfig(
        collectives=tuple(c for c in COLLECTIVES if c != "send_recv"),
        min_bytes=1 << 10,
        max_bytes=parse_size(args.max_bytes),
        factor=4.0,
        warmup=5,
        iters=args.iters,
        places=("in", "out"),
        backend="nccl",
        check=True,
        max_seconds_per_size=5.0,
        timeout_s=300.0,
    )
    doc: dict[str, Any] = {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
    }
    self_report = launch_local(cfg, nprocs=1, timeout_s=900)
    doc["self_communicator"] = self_report
    two = SweepConfig(**{**cfg.to_dict(), "collectives": tuple(COLLECTIVES), "max_bytes": 1 << 26})
    try:
        doc["two_processes_one_gpu"] = launch_local(two, nprocs=2, timeout_s=600)
    except RuntimeError as e:
        doc["two_processes_one_gpu"] = {"refused": str(e)[-2000:]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    lines = [
        f"# NCCL on one GPU: {doc['device']}, NCCL {doc['nccl']}, torch {doc['torch']}, {doc['created']}",
        "",
        "## Self-communicator (1 rank)",
        "",
        "| collective | place | size | time us | algbw GB/s | busbw GB/s | check |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results_frame(self_report).iter_rows(named=True):
        lines.append(
            f"| {r['collective']} | {r['place']} | {r['bytes']} | {r['time_ns'] / 1e3:.1f} | "
            f"{r['algbw_Bps'] / 1e9:.2f} | {r['busbw_Bps'] / 1e9:.2f} | {r['check_error']} |"
        )
    lines += ["", "## Two processes on the one GPU", ""]
    two_doc = doc["two_processes_one_gpu"]
    if "refused" in two_doc:
        lines.append("NCCL refused:\n\n```\n" + two_doc["refused"] + "\n```")
    else:
        for r in results_frame(two_doc).iter_rows(named=True):
            lines.append(
                f"- {r['collective']} {r['place']} {r['bytes']} B: {r['time_ns'] / 1e3:.1f} us, "
                f"busbw {r['busbw_Bps'] / 1e9:.2f} GB/s, check {r['check_error']}"
            )
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
