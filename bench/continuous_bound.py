"""Continuous mode keeps disk and memory bounded: a 2-rank gloo DDP job traced for minutes.

    python bench/continuous_bound.py [--seconds 600] [--window-s 10] [--regions 200]

Two ranks (a subprocess each, torchrun's environment) train a small MLP with DDP over gloo on
the CPU, each step a 10 ms data wait, `--regions` nested compute regions and the all-reduces
(DDP buckets and collectives, traced by stallscope.torch), in a continuous trace with a window of
`--window-s` seconds and 1 s flushes, for `--seconds`. Every second the parent samples, per rank:
the bytes of its event part files (the window), of its summary files, its resident memory
(VmRSS), and the steps summarized.

The bound it states and checks (capture/_window.py): the parts on disk hold at most the window W
plus one flush interval F of events, so bytes <= (W + F + slack) x R x b, where R is the event
rate (events/s, the highest over any 5 s of the run, from the summary's per-step event counts)
and b the bytes per event of the part files (what the window deleted: bytes / events). slack is
one more F: a part is written up to F after its first event ended. Memory: the resident size must
not grow once the first windows have filled (from 2 W on, the peak of the last third of the run at
most `--rss-growth-mib` above the peak of the middle third). The summary grows with the steps (its
bytes per step are reported).

Results: bench/results/continuous_bound.json (a short CI run: --seconds 30 --out elsewhere).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLUSH_S = 1.0


def worker(out: str, seconds: float, window_s: float, regions: int) -> None:
    """One rank: DDP steps in a continuous trace until `seconds` have passed."""
    import datetime as dt

    import torch
    import torch.distributed as dist

    import stallscope
    import stallscope.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=dt.timedelta(seconds=60))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=1)
    stallscope.torch.instrument(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    wait = stallscope.region("next_batch", category="data")
    layer = stallscope.region("layer", category="compute")
    forward = stallscope.region("forward", category="compute")
    # every rank stops at the same step: the first to reach the end says so through a collective
    stop = torch.zeros(1)
    t_end = time.monotonic() + seconds
    opts = {"mode": "continuous", "window_s": window_s, "flush_interval": FLUSH_S}
    with stallscope.trace(out, **opts):
        while True:
            stallscope.step()
            with wait:  # a loader's 10 ms
                time.sleep(0.01)
                x = torch.randn(32, 128)
            with forward:
                for _ in range(regions):
                    with layer:
                        pass
                loss = model(x).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            stop.fill_(1.0 if time.monotonic() > t_end else 0.0)
            dist.all_reduce(stop)
            if stop.item() > 0:
                break
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _sizes(run: Path, stem: str) -> tuple[int, int, int]:
    """(bytes of the stem's part files, their count, bytes of its summary files)."""
    parts = [p for p in run.glob(f"{stem}.part-*.parquet")]
    part_bytes = 0
    for p in parts:
        with contextlib.suppress(FileNotFoundError):  # deleted by the window meanwhile
            part_bytes += p.stat().st_size
    summary = 0
    for p in (run / "summary").glob(f"{stem}.*"):
        with contextlib.suppress(FileNotFoundError):  # rolled into Parquet meanwhile
            summary += p.stat().st_size
    return part_bytes, len(parts), summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--window-s", type=float, default=10.0)
    ap.add_argument("--regions", type=int, default=1000, help="compute regions per step")
    ap.add_argument("--rss-growth-mib", type=float, default=64.0)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "continuous_bound.json"
    )
    ap.add_argument(
        "--worker",
        nargs=4,
        metavar=("OUT", "SECONDS", "WINDOW_S", "REGIONS"),
        help=argparse.SUPPRESS,
    )
    a = ap.parse_args()
    if a.worker:
        out, seconds, window_s, regions = a.worker
        worker(out, float(seconds), float(window_s), int(regions))
        return
    run = Path(tempfile.mkdtemp(prefix="stallscope-bound-")) / "run"
    port = _free_port()
    procs = []
    for r in range(2):
        env = dict(
            os.environ,
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            RANK=str(r),
            WORLD_SIZE="2",
            LOCAL_RANK=str(r),
            LOCAL_WORLD_SIZE="2",
            OMP_NUM_THREADS="1",
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    str(run),
                    str(a.seconds),
                    str(a.window_s),
                    str(a.regions),
                ],
                env=env,
            )
        )
    load_start = os.getloadavg()[0]
    samples: list[dict[str, object]] = []
    t0 = time.monotonic()
    while any(p.poll() is None for p in procs):
        time.sleep(1.0)
        row: dict[str, object] = {"t_s": round(time.monotonic() - t0, 2)}
        for r, p in enumerate(procs):
            pb, n, sb = _sizes(run, f"rank-{r:05d}")
            row[f"r{r}"] = {"part_bytes": pb, "parts": n, "summary_bytes": sb, "rss": _rss(p.pid)}
        samples.append(row)
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit(f"a rank failed: exit codes {codes}")
    result = evaluate(run, samples, a)
    result |= {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared)",
        "load_avg_1min_at_start": load_start,
        "load_avg_1min_at_end": os.getloadavg()[0],
        "run_dir": str(run),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    if not result["met"]:
        raise SystemExit("bound not met (see the result)")


def evaluate(
    run: Path, samples: list[dict[str, object]], a: argparse.Namespace
) -> dict[str, object]:
    """The measured rate and bytes per event, the bound, and whether every sample kept it."""
    import polars as pl

    import stallscope

    doc = json.loads((run / "run.json").read_text())
    summary = stallscope.load_summary(run, align_clocks=False).filter(pl.col("step").is_not_null())
    ranks: dict[str, object] = {}
    met = True
    w, f = a.window_s, FLUSH_S
    for r in range(2):
        stem = f"rank-{r:05d}"
        cont = doc["processes"][stem]["continuous"]
        win = cont["window"]
        b = win["bytes_deleted"] / max(win["events_deleted"], 1)
        mine = summary.filter(pl.col("rank") == r).sort("start_ns")
        # events/s over any 5 s: the steps that ended in each 5 s bin
        t = (mine["end_ns"] - mine["start_ns"].min()) // 5_000_000_000
        per_bin = mine.with_columns(_bin=t).group_by("_bin").agg(pl.col("events").sum())
        rate = float(per_bin["events"].max()) / 5.0 if per_bin.height else 0.0  # type: ignore[arg-type]
        bound = (w + 2 * f) * rate * b
        seen = [s[f"r{r}"]["part_bytes"] for s in samples]  # type: ignore[index]
        rss = [s[f"r{r}"]["rss"] for s in samples]  # type: ignore[index]
        filled = [x for s, x in zip(samples, rss, strict=True) if s["t_s"] >= 2 * w and x]  # type: ignore[operator]
        third = len(filled) // 3
        # a leak shows as a higher peak in the last third than in the middle one (the
        # allocator's caches make single samples swing by tens of MiB)
        growth = (max(filled[-third:]) - max(filled[third : 2 * third])) / 2**20 if third else 0.0
        steps = mine.height
        # the peak the window itself saw (each part counted from its write until deleted)
        peak = max(max(seen), int(win["peak_bytes_on_disk"]))
        ok = peak <= bound and growth <= a.rss_growth_mib
        met = met and ok
        ranks[stem] = {
            "steps": steps,
            "events_per_s_max_5s": rate,
            "bytes_per_event_on_disk": b,
            "bound_bytes": bound,
            "max_part_bytes_seen": max(seen),
            "max_over_bound": max(seen) / bound if bound else None,
            "peak_over_bound": peak / bound if bound else None,
            "rss_mib_after_2_windows": filled[0] / 2**20 if filled else None,
            "rss_mib_peak": max(filled) / 2**20 if filled else None,
            "rss_mib_at_end": filled[-1] / 2**20 if filled else None,
            "rss_growth_mib": growth,
            "summary_bytes_per_step": (
                samples[-1][f"r{r}"]["summary_bytes"] / steps  # type: ignore[index]
                if steps
                else None
            ),
            "window": win,
            "summary": cont["summary"],
            "met": ok,
        }
    return {
        "benchmark": "continuous_bound",
        "seconds": a.seconds,
        "window_s": w,
        "flush_interval_s": f,
        "regions_per_step": a.regions,
        "bound": "part bytes <= (window_s + 2 x flush_interval) x R x b; RSS peak of the last "
        f"third <= that of the middle third + {a.rss_growth_mib} MiB",
        "ranks": ranks,
        "met": met,
        "samples_kept_every": 5,  # of the 1 s samples, to keep the result small
        "samples": samples[::5],
    }


if __name__ == "__main__":
    main()
