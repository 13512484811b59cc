"""The differential stall method (`stallscope analyze`) on the CPU test bed, beside the
trace-based stall tables of the same runs, and the macroscopic model of communication stall.

Part 1, the method: `stallscope analyze` (the command, timed end to end) on the demo model (the
MLP of `stallscope demo`, 3 x 512, on the generated JPEG pipeline, batch 64, 1 loader worker per
rank) with the command's defaults (G = 2: 1 device, 2 in one node, 2 over 2 emulated nodes at
1 Gbit/s), and on a ResNet-like CNN (3 blocks, 16 channels, batch 32) with link rates 1 Gbit/s
and 200 Mbit/s. Target: the demo's analysis, both estimates printed, in under 300 s on 2 cores.

Part 2, the layers-and-gradients model: nine MLPs (depth 1-16, width 64-256: 2-17 layers with
parameters, 0.8-5 MB of gradients) each run on 1 device, on 2 devices in one node, and on 2
nodes at 1 Gbit/s and 200 Mbit/s; communication stall = T(2 over 2 nodes) - T(1 device); per
rate the fit stall = a + b x layers + c x gradient bytes on six models, its error on the three
held out; beside it the trace's communication stall, the predictor's (stallscope.predict: the
profile of the one-node run predicted on 2 nodes at the rate, minus its prediction on 1 device)
and the bucketed-overlap formula's at the nominal rate.

The cold runs evict the dataset's files (posix_fadvise), not the whole page cache: this machine
is shared (--cold auto drops it all as root). Each part runs the noise guard (two probe
processes side by side against one alone) before and after; a ratio above 1.1 marks the part
"quiet": false, its numbers kept for the record. Needs root and iproute2 (the test bed), torch
and Pillow. Results: bench/results/differential.{json,md}.

    python bench/differential.py            # both parts, about 10-20 min on 2 cores
    python bench/differential.py --quick    # a smoke run: fewer steps and models
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from stallscope.comm._neighbour import neighbour_guard
from stallscope.differential import ModelPoint, fit_layers_gradients, sweep_comm
from stallscope.workloads._models import gradient_bytes, layer_count, mlp

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_S = 300.0
#: (depth, width) of the sweep's MLPs; every third is held out of the fit.
MLPS = [(1, 64), (8, 64), (16, 64), (1, 128), (8, 128), (16, 128), (1, 256), (4, 256), (8, 256)]
HELD_OUT = {1, 4, 7}
RATES = ("1gbit", "200mbit")


def _guard() -> dict[str, Any]:
    g = neighbour_guard(repeats=2)
    return {"ratio": round(g.ratio, 3), "quiet": g.ok}


def analyze_job(name: str, args: list[str], job: list[str], out: Path) -> dict[str, Any]:
    """Run `stallscope analyze ARGS -- JOB`, timed; its JSON and printed tables."""
    js = out / f"{name}.json"
    cmd = [sys.executable, "-m", "stallscope.cli.main", "analyze", "--out", str(out / name),
           "--json", str(js), "--cold", "fadvise", *args, "--", *job]  # fmt: skip
    print(f"== {name}: {' '.join(cmd[3:])}", file=sys.stderr)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"{name} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    print(p.stdout, file=sys.stderr)
    result = orjson.loads(js.read_bytes().replace(str(out).encode(), b"OUT"))
    result["command"] = ["python", *result["command"][1:]]
    shown = ["stallscope", "analyze", *args, "--", "python", *job[1:]]
    return {"command": shown, "wall_s": round(wall, 1), "printed": p.stdout, "result": result}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def part_method(out: Path, quick: bool) -> dict[str, Any]:
    steps = ["--steps", "5"] if quick else []
    date = _now()
    guard = {"before": _guard()}
    demo = analyze_job("demo", steps, [sys.executable, "-m", "stallscope.workloads._train"], out)
    demo["target_s"] = TARGET_S
    demo["met"] = demo["wall_s"] < TARGET_S
    cnn = analyze_job(
        "cnn",
        [*steps, "--rate", "1gbit", "--rate", "200mbit"],
        [sys.executable, "-m", "stallscope.workloads._train", "--model", "cnn", "--blocks", "3",
         "--width", "16", "--batch-size", "32"],
        out,
    )  # fmt: skip
    guard["after"] = _guard()
    return {"date": date, "guard": guard, "demo": demo, "cnn": cnn}


def _points(quick: bool, data: Path) -> list[ModelPoint]:
    shapes = MLPS[:4] if quick else MLPS
    pts = []
    for d, w in shapes:
        m = mlp(d, w)
        argv = (sys.executable, "-m", "stallscope.workloads._train", "--depth", str(d), "--width",
                str(w), "--batch-size", "32", "--workers", "0", "--images", "2048", "--data",
                str(data))  # fmt: skip
        pts.append(ModelPoint(f"mlp-{d}x{w}", argv, layer_count(m), gradient_bytes(m)))
    return pts


def _mape(pred: pl.Series, meas: pl.Series) -> float:
    return float(((pred - meas).abs() / meas.abs()).mean() * 100)  # type: ignore[operator]


def part_macro(out: Path, quick: bool) -> dict[str, Any]:
    date = _now()
    guard = {"before": _guard()}
    pts = _points(quick, out / "images")
    t0 = time.monotonic()
    df = sweep_comm(pts, out / "sweep", rates=RATES[:1] if quick else RATES,
                    steps=5 if quick else 12, progress=lambda m: print(m, file=sys.stderr))  # fmt: skip
    wall = time.monotonic() - t0
    guard["after"] = _guard()
    held = [pts[i].name for i in sorted(HELD_OUT) if i < len(pts)]
    df = df.with_columns(held_out=pl.col("point").is_in(held))
    fit = fit_layers_gradients(df)
    views = {}
    for (rate,), g in df.group_by("rate", maintain_order=True):
        views[str(rate)] = {
            "predictor_mape_pct": round(_mape(g["predicted_ns"], g["comm_stall_ns"]), 1),
            "formula_mape_pct": round(_mape(g["formula_ns"], g["comm_stall_ns"]), 1),
            "trace_mape_pct": round(_mape(g["trace_comm_ns"], g["comm_stall_ns"]), 1),
        }
    return {
        "date": date,
        "guard": guard,
        "wall_s": round(wall, 1),
        "points": df.to_dicts(),
        "fit": fit.coefficients.to_dicts(),
        "predictions": fit.predictions.select(
            "point", "rate", "layers", "gradient_bytes", "comm_stall_ns", "fitted_ns",
            "error_pct", "held_out",
        ).to_dicts(),
        "views": views,
    }  # fmt: skip


def _md(doc: dict[str, Any]) -> str:
    lines = [f"# differential.py ({doc['machine']})", ""]
    m = doc.get("method")
    if m:
        lines += [f"Part 1, the method: {m['date']}; guard {m['guard']}", ""]
        for name in ("demo", "cnn"):
            j = m[name]
            lines += [f"## {name}: `{' '.join(j['command'])}`", "", f"wall {j['wall_s']} s", "",
                      "```", j["printed"].rstrip(), "```", ""]  # fmt: skip
    mac = doc.get("macro")
    if mac:
        lines += ["## layers and gradients", "", f"{mac['date']}; guard {mac['guard']}", "",
                  "| model | layers | gradient MB | rate | T(1) ms | T(2 over 2) ms | comm stall ms | "
                  "trace ms | predictor ms | formula ms | fit ms | held out |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        fitted = {(p["point"], p["rate"]): p for p in mac["predictions"]}
        for p in mac["points"]:
            f = fitted[(p["point"], p["rate"])]
            lines.append(
                f"| {p['point']} | {p['layers']} | {p['gradient_bytes'] / 1e6:.2f} | {p['rate']} | "
                f"{p['step_one_ns'] / 1e6:.1f} | {p['step_network_ns'] / 1e6:.1f} | "
                f"{p['comm_stall_ns'] / 1e6:.1f} | {p['trace_comm_ns'] / 1e6:.1f} | "
                f"{p['predicted_ns'] / 1e6:.1f} | {p['formula_ns'] / 1e6:.1f} | "
                f"{f['fitted_ns'] / 1e6:.1f} | "
                f"{'yes' if f['held_out'] else ''} |"
            )
        lines += ["", "| rate | a ms | b µs/layer | c ms/MB | R^2 | held-out MAPE % | "
                  "predictor MAPE % | formula MAPE % | trace MAPE % |",
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for c in mac["fit"]:
            v = mac["views"][c["rate"]]
            lines.append(
                f"| {c['rate']} | {c['intercept_ns'] / 1e6:.2f} | {c['ns_per_layer'] / 1e3:.1f} | "
                f"{c['ns_per_byte']:.2f} | {c['r2']:.3f} | {c['held_out_mape_pct']:.1f} | "
                f"{v['predictor_mape_pct']} | {v['formula_mape_pct']} | {v['trace_mape_pct']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--part", choices=("method", "macro", "all"), default="all")
    ap.add_argument("--quick", action="store_true", help="a smoke run (results not written)")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here")
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="stallscope-differential-"))
    doc: dict[str, Any] = {
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} CPUs",
    }
    if a.part in ("method", "all"):
        doc["method"] = part_method(out, a.quick)
    if a.part in ("macro", "all"):
        doc["macro"] = part_macro(out, a.quick)
    text = _md(doc)
    print(text)
    if a.quick:
        return
    RESULTS.mkdir(exist_ok=True)
    old = RESULTS / "differential.json"
    if a.part != "all" and old.exists():  # keep the other part's latest result
        prev = orjson.loads(old.read_bytes())
        for k in ("method", "macro"):
            doc.setdefault(k, prev.get(k))
        text = _md(doc)
    old.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    (RESULTS / "differential.md").write_text(text)


if __name__ == "__main__":
    main()
