"""An example calibration on the emulated test bed: every collective, both link tiers.

2 nodes x 2 ranks, links shaped to a rate (default 200 Mbit/s), gloo: `bench comm` over all six
collectives, in and out of place, on the intra-node group (2 ranks of node 0, loopback) and the
inter-node group (one rank per node, the shaped link), 64 KiB .. 8 MiB; alpha-beta fitted per
collective, tier and place. Shows what a calibration file holds and how well each collective fits.
The test bed's defaults (bucket 2 ms of the rate, pure ACKs ahead of data) and ranks under
SCHED_FIFO (--no-realtime, --no-ack-priority for comparisons). The noisy-neighbour guard runs
before and after, and the rest of the machine's CPU use is measured during the sweep. Needs root
and iproute2.
Results: bench/results/comm_calibration_example.{json,md} (the JSON is the calibration file).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import orjson

from stallscope.comm import COLLECTIVES, SweepConfig, write_calibration
from stallscope.comm._neighbour import cpu_sample, neighbour_guard, others_during
from stallscope.testbed import Testbed, parse_rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument("--max-bytes", type=int, default=8 << 20)
    ap.add_argument("--no-realtime", action="store_true", help="ranks at normal priority")
    ap.add_argument("--no-ack-priority", action="store_true", help="one FIFO per link")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "comm_calibration_example"
    )
    args = ap.parse_args()
    cfg = SweepConfig(
        collectives=COLLECTIVES,
        min_bytes=64 * 1024,
        max_bytes=args.max_bytes,
        factor=2.0,
        warmup=1,
        iters=3,
        places=("in", "out"),
        min_seconds_per_size=0.2,
        min_bytes_per_size=3 << 20,
        warmup_bytes=1 << 20,
        max_seconds_per_size=4.0,
        tiers=("intra_node", "inter_node"),
        check=True,
        timeout_s=600.0,
    )
    before, load0 = neighbour_guard(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="stallscope-calib-") as tmp:
        cfg_path, rep_path = Path(tmp) / "cfg.json", Path(tmp) / "report.json"
        cfg_path.write_bytes(orjson.dumps(cfg.to_dict()))
        s0 = cpu_sample()
        with Testbed(
            nodes=2,
            ranks_per_node=2,
            rate=args.rate,
            mtu=args.mtu,
            realtime=not args.no_realtime,
            ack_priority=not args.no_ack_priority,
        ) as tb:
            argv = [sys.executable, "-m", "stallscope.comm._worker", str(cfg_path), str(rep_path)]
            tb.run(argv, timeout_s=900).check()
            burst = tb.bursts[0]
        s1 = cpu_sample()
        report = orjson.loads(rep_path.read_bytes())
    during = None if s0 is None or s1 is None else others_during(s0, s1)
    after, load1 = neighbour_guard(), os.getloadavg()[0]
    report["testbed"] = {
        "tbf_burst_bytes": burst,
        "realtime": not args.no_realtime,
        "ack_priority": not args.no_ack_priority,
        "others_during": None if during is None else during.to_dict(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fits = write_calibration(f"{args.out}.json", report)
    bad = [r for r in report["results"] if r["check_error"] not in (None, 0.0)]
    rate_bits = parse_rate(args.rate)
    lines = [
        f"# Example calibration: 2 nodes x 2 ranks, {args.rate} links (MTU {args.mtu}), gloo",
        "",
        f"{report['created']}, torch {report['torch']}. Noisy-neighbour guard "
        f"{before.ratio:.2f}x before / {after.ratio:.2f}x after (limit 1.1; load average "
        f"{load0:.1f} / {load1:.1f}): "
        + (
            "clean."
            if before.ok and after.ok
            else "the machine was shared: intra-node numbers "
            "(CPU-bound loopback) are noisy; inter-node ones are bandwidth-bound."
        )
        + f" Result checks: {len(report['results']) - len(bad)} of {len(report['results'])} exact.",
        "",
        f"Test bed: tbf bucket {burst} B, ranks under SCHED_FIFO: "
        f"{'yes' if not args.no_realtime else 'no'}, pure ACKs ahead of data: "
        f"{'yes' if not args.no_ack_priority else 'no'}; the rest of the machine used "
        + (
            "-"
            if during is None
            else f"{during.others_cores:.2f} cores + {during.steal_cores:.2f} steal"
        )
        + " during the sweep.",
        "",
        "Fits on sizes >= 64 KiB (block medians). bus bw = 1/beta; for the inter-node tier "
        f"compare it with the link rate, {rate_bits / 1e6:.0f} Mbit/s.",
        "",
        "| collective | tier | place | alpha us | bus bw Mbit/s | R^2 | max err % | mean err % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in fits.iter_rows(named=True):
        lines.append(
            f"| {r['collective']} | {r['tier']} | {r['place']} | {r['alpha_s'] * 1e6:.0f} | "
            f"{r['bandwidth_Bps'] * 8 / 1e6:.1f} | {r['r2']:.4f} | {r['max_rel_error'] * 100:.1f} | "
            f"{r['mean_rel_error'] * 100:.1f} |"
        )
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
