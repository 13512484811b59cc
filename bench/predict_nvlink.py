"""One node over NVLink / NVSwitch: the planner's collective times against XLA's H100 table.

The figures (bench/data/xla_sm90_collectives.json, source and field meanings there): XLA's
measured collective table for sm_90, one group of 8 GPUs in one host, all-reduce, all-gather
and reduce-scatter of F32 buffers from 1 KiB to 2 GiB by doubling. Each row's measured time is
the size over the throughput, as XLA's generator and interpolator define them: the size is
nccl-tests' (the buffer of all-reduce, the gathered output of all-gather, the input of
reduce-scatter), 4 bytes per element of the stored shape, times 8 for reduce-scatter, whose
stored shape is one rank's output.

The prediction is the planner's own (``stallscope.plan``'s ``collective_s``) on the
``dgx-h100`` system preset (8 H100 SXM, NVLink 4 through NVSwitch, 450 GB/s per GPU per
direction) for a group of 8 ranks on one node: NCCL's base latency plus the ring's alpha-beta
model over the node's NVLink tier. Nothing is fitted to this table. The error of each row is
the predicted time over the measured one, less 1; reported per op and size band: below 1 MiB
(latency-bound), 1-64 MiB (tensor-parallel activations), from 64 MiB (ZeRO / FSDP shards and
gradient buckets). Per op also the bus bandwidth the table shows at its two largest sizes
against the model's, and the table's fastest small-size time against the model's floor (its
time at 1 KiB).

    python bench/predict_nvlink.py    # results: bench/results/predict_nvlink.json
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from stallscope.comm import bus_factor
from stallscope.plan import Cluster, load_system
from stallscope.plan._comm import collective_s
from stallscope.plan._layout import Placement

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "xla_sm90_collectives.json"
SYSTEM = "dgx-h100"
GROUP = 8  # devices in the table's one replica group, all on one node
F32_BYTES = 4
#: XLA opcode -> the planner's collective name
OPS = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter"}
MIB = 2**20
#: (name, from bytes, below bytes)
BANDS = (
    ("below_1MiB", 0, MIB),
    ("1MiB_to_64MiB", MIB, 64 * MIB),
    ("from_64MiB", 64 * MIB, math.inf),
)


def tensor_bytes(op: str, elements: int) -> int:
    """nccl-tests' size of one table row: the generator's tensor_size_bytes."""
    if op not in OPS:
        raise ValueError(f"unknown opcode {op!r}: the table rows hold {', '.join(OPS)}")
    if elements <= 0:
        raise ValueError(f"{op}: element count must be > 0, got {elements}")
    per_rank = GROUP if op == "reduce-scatter" else 1  # its stored shape is one rank's output
    return elements * F32_BYTES * per_rank


def band_of(nbytes: int) -> str:
    return next(name for name, lo, hi in BANDS if lo <= nbytes < hi)


def measured(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The table's rows with nccl-tests' size and the measured time in seconds."""
    out = []
    for i, r in enumerate(rows):
        missing = [k for k in ("op", "elements", "throughput_Bps") if k not in r]
        if missing:
            raise ValueError(f"row {i} lacks {', '.join(missing)}")
        if r["throughput_Bps"] <= 0:
            raise ValueError(f"row {i}: throughput must be > 0, got {r['throughput_Bps']}")
        n = tensor_bytes(r["op"], int(r["elements"]))
        out.append(
            {
                "op": OPS[r["op"]],
                "bytes": n,
                "band": band_of(n),
                "measured_s": n / float(r["throughput_Bps"]),
            }
        )
    return pl.DataFrame(out)


def predict(table: pl.DataFrame, system: Cluster) -> pl.DataFrame:
    """``table`` (``measured``) with the planner's time, both bus bandwidths and the error."""
    group = Placement(GROUP, 1)
    pred = [
        collective_s(system, op, float(n), group)
        for op, n in zip(table["op"], table["bytes"], strict=True)
    ]
    factor = {op: bus_factor(op, GROUP) for op in OPS.values()}
    return table.with_columns(predicted_s=pl.Series(pred, dtype=pl.Float64)).with_columns(
        error_pct=100.0 * (pl.col("predicted_s") / pl.col("measured_s") - 1.0),
        measured_busbw_GBps=pl.col("bytes")
        / pl.col("measured_s")
        * pl.col("op").replace_strict(factor)
        / 1e9,
        predicted_busbw_GBps=pl.col("bytes")
        / pl.col("predicted_s")
        * pl.col("op").replace_strict(factor)
        / 1e9,
    )


def by_band(rows: pl.DataFrame) -> pl.DataFrame:
    """Per op and size band: rows, mean absolute and mean signed error, the extremes."""
    order = {name: i for i, (name, _, _) in enumerate(BANDS)}
    return (
        rows.group_by("op", "band")
        .agg(
            rows=pl.len(),
            mean_abs_error_pct=pl.col("error_pct").abs().mean(),
            mean_error_pct=pl.col("error_pct").mean(),
            min_error_pct=pl.col("error_pct").min(),
            max_error_pct=pl.col("error_pct").max(),
        )
        .with_columns(
            o=pl.col("op").replace_strict({op: i for i, op in enumerate(OPS.values())}),
            b=pl.col("band").replace_strict(order),
        )
        .sort("o", "b")
        .drop("o", "b")
    )


def _slope_busbw(r: pl.DataFrame, op: str, col: str) -> float | None:
    """Bus bandwidth in GB/s from the slope of ``col`` over the two largest sizes of ``r``."""
    if r.height < 2:
        return None
    a, b = r.sort("bytes").tail(2).iter_rows(named=True)
    slope = (b[col] - a[col]) / (b["bytes"] - a["bytes"])  # s per byte
    return float(bus_factor(op, GROUP) / slope / 1e9)


def limits(rows: pl.DataFrame) -> pl.DataFrame:
    """Per op: the bus bandwidth of the table's two largest sizes and of the model's (from the
    slope between them, so any fixed time drops out), and the table's fastest and median time
    below 1 MiB against the model's floor (its time for the smallest row). None where an op has
    too few rows for a figure."""
    out = []
    for op in OPS.values():
        r = rows.filter(pl.col("op") == op).sort("bytes")
        if r.is_empty():
            continue
        busbw, model = _slope_busbw(r, op, "measured_s"), _slope_busbw(r, op, "predicted_s")
        small = r.filter(pl.col("band") == BANDS[0][0])["measured_s"] * 1e6
        out.append(
            {
                "op": op,
                "measured_busbw_large_GBps": busbw,
                "model_busbw_large_GBps": model,
                "model_over_measured_busbw": model / busbw if model and busbw else None,
                "measured_fastest_small_us": small.min() if len(small) else None,
                "measured_median_small_us": small.median() if len(small) else None,
                "model_floor_us": r["predicted_s"][0] * 1e6,
            }
        )
    return pl.DataFrame(out)


def run(doc: dict[str, Any], system: Cluster) -> dict[str, pl.DataFrame]:
    rows = predict(measured(doc["rows"]), system)
    return {"rows": rows, "by_band": by_band(rows), "limits": limits(rows)}


def main() -> int:
    doc = orjson.loads(DATA.read_bytes())
    system = load_system(SYSTEM)
    res = run(doc, system)
    rows, bands, lim = res["rows"], res["by_band"], res["limits"]
    out = {
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "source": doc["source"],
        "system": {
            "preset": SYSTEM,
            "group": f"{GROUP} ranks on 1 node",
            "intra_node_GBps": system.intra_node_GBps,
            "intra_node_fraction": system.intra_node_fraction,
            "base_latency_us": system.base_latency_s * 1e6,
            "nvlink_hop_us": system.nvlink_hop_s * 1e6,
        },
        "mean_abs_error_pct": rows["error_pct"].abs().mean(),
        "by_band": bands.to_dicts(),
        "limits": lim.to_dicts(),
        "rows": rows.to_dicts(),
    }
    path = HERE / "results" / "predict_nvlink.json"
    path.write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2) + b"\n")
    for r in rows.iter_rows(named=True):
        print(
            f"{r['op']:15s} {r['bytes'] / MIB:10.3f} MiB: measured {r['measured_s'] * 1e6:8.1f} us"
            f" ({r['measured_busbw_GBps']:5.1f} GB/s bus), predicted {r['predicted_s'] * 1e6:8.1f}"
            f" us ({r['predicted_busbw_GBps']:5.1f}), {r['error_pct']:+6.1f} %"
        )
    print("\nby op and size (error of the predicted time):")
    for r in bands.iter_rows(named=True):
        print(
            f"  {r['op']:15s} {r['band']:14s} {r['rows']:2d} rows: mean |error| "
            f"{r['mean_abs_error_pct']:5.1f} %, mean {r['mean_error_pct']:+6.1f} % "
            f"({r['min_error_pct']:+.1f} to {r['max_error_pct']:+.1f})"
        )
    print("\nlimits:")
    for r in lim.iter_rows(named=True):
        print(
            f"  {r['op']:15s} large-message bus bandwidth: table {r['measured_busbw_large_GBps']:.0f}"
            f" GB/s, model {r['model_busbw_large_GBps']:.0f} (x{r['model_over_measured_busbw']:.2f});"
            f" below 1 MiB: table fastest {r['measured_fastest_small_us']:.1f} us, median "
            f"{r['measured_median_small_us']:.1f}, model floor {r['model_floor_us']:.1f} us"
        )
    print(f"\nmean absolute error over all {rows.height} rows: {out['mean_abs_error_pct']:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
