"""How gloo moves DDP's bucket all-reduces on the test bed: the facts the predictor's gloo model
rests on (root, iproute2, torch).

On 2 emulated nodes x 1 rank at one rate (default 200 Mbit/s), with DDP's two-bucket sizes of the
demo model (1,071,144 and 6,293,504 bytes), medians of 7 (the first dropped):

- back to back: one all-reduce of both buckets' bytes, 4 times;
- concurrent: the two buckets' all-reduces issued at once (gloo runs them on its 2 threads);
- staggered: the second 33 ms after the first, the rank idle meanwhile (a GPU or the emulated
  device computing);
- staggered, busy: the same while the rank's main thread spins (CPU compute holding the core;
  both ranks share the machine's 2 cores, as the test bed's 2 x 1 runs do).

Expected if the link is shared fairly and work-conserving: concurrent and staggered-idle take the
time of back to back (the simulator may send buckets one after another); staggered-busy takes
longer by about the busy overlap (collectives need a core to progress: the profile's
comm_overlap). Results: bench/results/testbed_gloo_concurrency.json.

    sudo python bench/testbed_gloo_concurrency.py [--rate 200mbit]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
SMALL, LARGE = 1_071_144, 6_293_504
GAP_S, IDLE_S, REPS = 0.033, 0.08, 8

_RANK = f"""
import json, os, time, torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
a1, a7 = torch.ones({SMALL} // 4), torch.ones({LARGE} // 4)
both = torch.ones(({SMALL} + {LARGE}) // 4)

def wait_for(s, busy):
    end = time.perf_counter() + s
    if not busy:
        time.sleep(s)
        return
    while time.perf_counter() < end:
        pass

def pattern(gap, busy):
    out = []
    for _ in range({REPS}):
        wait_for({IDLE_S}, busy)
        t0 = time.perf_counter()
        w = [dist.all_reduce(a1, async_op=True)]
        if gap:
            wait_for(gap, busy)
        w.append(dist.all_reduce(a7, async_op=True))
        for x in w:
            x.wait()
        out.append((time.perf_counter() - t0) * 1e3)
    return out

res = {{}}
b2b = []
for _ in range({REPS}):
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(both)
    b2b.append((time.perf_counter() - t0) * 1e3)
res["back_to_back_ms"] = b2b
res["concurrent_ms"] = pattern(0.0, False)
res["staggered_idle_ms"] = pattern({GAP_S}, False)
res["staggered_busy_ms"] = pattern({GAP_S}, True)
if dist.get_rank() == 0:
    with open(os.environ["OUT"], "w") as f:
        json.dump(res, f)
dist.destroy_process_group()
"""


def main() -> int:
    from stallscope.comm._neighbour import neighbour_guard
    from stallscope.testbed import Testbed, parse_rate

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "testbed_gloo_concurrency.json")
    args = ap.parse_args()
    guard0 = neighbour_guard()
    with tempfile.TemporaryDirectory() as tmp:
        script, out = Path(tmp) / "rank.py", Path(tmp) / "out.json"
        script.write_text(_RANK)
        with Testbed(nodes=2, ranks_per_node=1, rate=args.rate, realtime=True) as tb:
            tb.run([sys.executable, str(script)], timeout_s=300, env={"OUT": str(out)}).check()
        raw = orjson.loads(out.read_bytes())
    guard1 = neighbour_guard()

    def median(xs: list[float]) -> float:
        ys = sorted(xs[1:])
        return ys[len(ys) // 2]

    rate = parse_rate(args.rate)
    medians = {k: median(v) for k, v in raw.items()}
    base = medians["back_to_back_ms"]
    res = {
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "rate": args.rate,
        "bytes": {"small": SMALL, "large": LARGE},
        "gap_ms": GAP_S * 1e3,
        "load_average": os.getloadavg(),
        "guard_before": guard0.to_dict(),
        "guard_after": guard1.to_dict(),
        "median_ms": medians,
        "over_back_to_back": {k: v / base for k, v in medians.items()},
        "back_to_back_payload_Mbps": (SMALL + LARGE) * 8 / (base * 1e-3) / 1e6,
        "link_Mbps": rate / 1e6,
        "runs_ms": raw,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(res, option=orjson.OPT_INDENT_2) + b"\n")
    print(
        orjson.dumps(
            {k: res[k] for k in ("median_ms", "over_back_to_back")}, option=orjson.OPT_INDENT_2
        ).decode()
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
