"""Collective bandwidth against message size, from the run's own collectives (each rank's
transfer time, its sync wait excluded), with a calibration's alpha-beta fit drawn over it when
one is given. Bus bandwidth as nccl-tests defines it (stallscope.comm._formulas)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from stallscope.report._data import ReportData
from stallscope.report._html import NoData, Section, esc, figure, table
from stallscope.report._style import SERIES_COLORS, size

# Op names (torch.distributed's, and imported traces' NCCL names without "_") -> the collective
# of the cost models, and by how much this rank's payload multiplies into nccl-tests' size.
_BASE: dict[str, tuple[str, str]] = {
    "allreduce": ("all_reduce", "one"),
    "allgather": ("all_gather", "group"),  # bytes: this rank's input, the output is p of them
    "allgatherintotensor": ("all_gather", "group"),
    "allgatherbase": ("all_gather", "group"),
    "reducescatter": ("reduce_scatter", "one"),  # bytes: the whole input
    "reducescattertensor": ("reduce_scatter", "one"),
    "broadcast": ("broadcast", "one"),
    "alltoall": ("all_to_all", "one"),
    "alltoallsingle": ("all_to_all", "one"),
    "send": ("send_recv", "one"),
    "recv": ("send_recv", "one"),
    "isend": ("send_recv", "one"),
    "irecv": ("send_recv", "one"),
}


def measured(collectives: pl.DataFrame) -> pl.DataFrame:
    """collective, nbytes (nccl-tests' size), group_size, tier, seconds, busbw_Bps: one row
    per rank and instance that moved bytes."""
    from stallscope.comm import bus_factor

    rows = []
    for name, nbytes, p, nnodes, transfer in collectives.select(
        "name", "bytes", "group_size", "nnodes", "transfer_ns"
    ).iter_rows():
        key = str(name).lower().replace("_", "").removeprefix("c10d:")
        base = _BASE.get(key)
        if base is None or not nbytes or not transfer or transfer <= 0:
            continue
        coll, scale = base
        p = int(p or 2)
        if p < 2:
            continue
        n = float(nbytes) * (p if scale == "group" else 1)
        secs = transfer * 1e-9
        rows.append(
            {
                "collective": coll,
                "nbytes": n,
                "group_size": p,
                "tier": "inter_node" if (nnodes or 1) > 1 else "intra_node",
                "seconds": secs,
                "busbw_Bps": n / secs * bus_factor(coll, p),
            }
        )
    schema = {
        "collective": pl.String,
        "nbytes": pl.Float64,
        "group_size": pl.Int64,
        "tier": pl.String,
        "seconds": pl.Float64,
        "busbw_Bps": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def _fit_curve(fit: dict[str, object], p: int, xs: np.ndarray) -> np.ndarray:
    from stallscope.comm import bus_factor, predict_seconds

    coll = str(fit["collective"])
    alpha, beta = float(fit["alpha_s"]), float(fit["beta_s_per_byte"])  # type: ignore[arg-type]
    t = np.array([predict_seconds(coll, float(n), p, alpha, beta) for n in xs])
    out: np.ndarray = xs / t * bus_factor(coll, p)
    return out


def render(data: ReportData) -> str | NoData:
    from stallscope.report._plot import pyplot, svg

    m = measured(data.collectives) if data.collectives is not None else None
    fits = data.calibration
    if (m is None or m.height == 0) and (fits is None or fits.height == 0):
        return NoData(
            "the run has no collectives that moved data, and no calibration was given "
            "(--calibration FILE from `stallscope bench comm --calibrate FILE`)"
        )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.8))
    colls = sorted(set(m["collective"].to_list() if m is not None else []))
    if fits is not None:
        colls += sorted(set(fits["collective"].to_list()) - set(colls))
    color = {c: SERIES_COLORS[i % len(SERIES_COLORS)] for i, c in enumerate(colls)}
    lo, hi = 1024.0, float(1 << 30)
    if m is not None and m.height:
        lo, hi = float(m["nbytes"].min()) / 2, float(m["nbytes"].max()) * 2  # type: ignore[arg-type]
        for c in colls:
            part = m.filter(pl.col("collective") == c)
            if part.height:
                ax.scatter(
                    part["nbytes"].to_numpy(),
                    part["busbw_Bps"].to_numpy() / 1e9,
                    s=10,
                    alpha=0.6,
                    color=color[c],
                    label=f"{c} (run, {part.height})",
                )
    drawn = []
    if fits is not None and fits.height:
        tiers = set(m["tier"].to_list()) if m is not None and m.height else {"intra_node"}
        xs = np.logspace(math.log10(lo), math.log10(hi), 60)
        shown = fits.filter(pl.col("tier").is_in(sorted(tiers)))
        if m is not None and m.height:  # the run's collectives only
            shown = shown.filter(pl.col("collective").is_in(m["collective"].unique().to_list()))
        for fit in shown.iter_rows(named=True):
            if fit.get("place", "in") != "in":
                continue
            p = int(fit["group_size"])
            ax.plot(
                xs,
                _fit_curve(fit, p, xs) / 1e9,
                color=color.get(str(fit["collective"]), "black"),
                lw=1.4,
                label=f"{fit['collective']} fit ({fit['tier']}, {p} ranks)",
            )
            drawn.append(fit)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes, nccl-tests convention)")
    ax.set_ylabel("bus bandwidth, GB/s")
    ax.legend(frameon=False, fontsize=8)
    parts = [
        '<p class="lead">Each dot is one collective on one rank: its size and its bus bandwidth '
        "over the transfer (the time after every rank arrived). Small messages are bound by "
        "latency, large ones by the link.</p>",
        figure(svg(fig, "bandwidth"), "Bus bandwidth against message size."),
    ]
    if m is not None and m.height:
        agg = (
            m.group_by("collective", "tier", "group_size")
            .agg(
                pl.len().alias("count"),
                pl.col("nbytes").median().alias("median size"),
                (pl.col("busbw_Bps").median() / 1e9).alias("median busbw GB/s"),
                (pl.col("busbw_Bps").max() / 1e9).alias("best busbw GB/s"),
            )
            .sort("collective")
        )
        parts.append(
            table(
                agg,
                formats={
                    "median size": size,
                    "median busbw GB/s": lambda v: f"{v:.3g}",
                    "best busbw GB/s": lambda v: f"{v:.3g}",
                },
            )
        )
    if fits is not None and not drawn:
        parts.append(
            f'<p class="notes">The calibration has no in-place fit for this run\'s link tier '
            f"({esc(', '.join(sorted(set(m['tier'].to_list())))) if m is not None else '?'})."
            "</p>"
        )
    return "".join(parts)


SECTION = Section("bandwidth", "Collective bandwidth against message size", render)
