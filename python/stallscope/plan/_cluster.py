"""The cluster a plan runs on (a ``Cluster``, read from a system file or a system preset): a GPU model, GPUs per node (the NVLink / NVSwitch domain), the
per-GPU bandwidth inside a node and the per-node NIC bandwidth across nodes.

A system file is JSON: ``{"gpu": "A100-80GB", "gpus_per_node": 8, "intra_node_GBps": 300,
"inter_node_Gbps": 1600}`` (per direction: per GPU inside a node in GB/s, per node across nodes
in Gbit/s). The GPU's figures come from the device table (``stallscope.predict``'s
``device(name)``); optional keys override them: ``peak_tflops`` (a number for bf16, or per
precision, each over the table's own), ``hbm_GBps``, ``hbm_GB``, ``sms``, ``matmul_fraction``,
``efficiency_table`` (a measured GEMM / attention table, see ``_device_model``),
``intra_node_fraction`` (NCCL's bus bandwidth over the NVLink rate: all-reduce),
``intra_node_copy_fraction`` (all-gather, reduce-scatter and sends, which NVLink SHARP's
in-switch reduction does not speed up; the all-reduce figure where the GPU's family has no
measurement of its own), ``inter_node_fraction``, ``intra_node_latency_us``,
``inter_node_latency_us`` (per ring step); ``_figure_checks`` checks each is a number in range.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

from stallscope.plan._attention import attention_data
from stallscope.plan._device_model import DeviceModel
from stallscope.plan._errors import PlanError, listed, nearest_names
from stallscope.plan._figure_checks import check_figures
from stallscope.plan._gemm import (
    efficiency_defaults,
    family_names,
    gemm_tables,
    mamf_fractions,
)
from stallscope.predict._matmul_rates import matmul_rates

#: The measured efficiency tables shipped with the package, one per GPU.
_TABLES: Final = Path(__file__).parents[1] / "predict" / "data" / "efficiency"
_REQUIRED = ("gpu", "gpus_per_node", "intra_node_GBps", "inter_node_Gbps")
_LINK_KEYS = (
    "intra_node_fraction",
    "intra_node_copy_fraction",
    "inter_node_fraction",
    "intra_node_latency_us",
    "inter_node_latency_us",
)
_DEVICE_KEYS = ("peak_tflops", "hbm_GBps", "hbm_GB", "sms", "matmul_fraction", "efficiency_table")
_INFORMATIVE = frozenset(
    {"source", "sources", "notes", "note", "date", "aliases", "where", "price", "anchored_on"}
    | {"nics_per_node", "intra_node_link", "inter_node_link"}
)


@dataclass(frozen=True)
class Cluster:
    """A homogeneous cluster: nodes of ``gpus_per_node`` GPUs."""

    name: str
    gpu: str
    gpus_per_node: int
    intra_node_GBps: float  # noqa: N815 (the system file's key); per GPU, per direction (NVLink / NVSwitch)
    inter_node_Gbps: float  # noqa: N815 (per node, per direction: all its NICs)
    device: DeviceModel
    intra_node_fraction: float = 0.77  # all-reduce
    intra_node_copy_fraction: float = 0.77  # all-gather, reduce-scatter, sends
    inter_node_fraction: float = 0.79
    base_latency_s: float = 8.4e-6
    nvlink_hop_s: float = 3.4e-6
    network_hop_s: float = 9.6e-6

    @property
    def intra_bytes_s(self) -> float:
        """Achievable all-reduce bus bandwidth per GPU inside a node, bytes/s."""
        return self.intra_node_GBps * 1e9 * self.intra_node_fraction

    @property
    def intra_copy_bytes_s(self) -> float:
        """Achievable all-gather / reduce-scatter bus bandwidth and send rate per GPU inside a
        node, bytes/s."""
        return self.intra_node_GBps * 1e9 * self.intra_node_copy_fraction

    @property
    def inter_bytes_s_per_gpu(self) -> float:
        """Achievable NIC bandwidth per GPU when every GPU of a node sends at once, bytes/s."""
        return self.inter_node_Gbps / 8 * 1e9 * self.inter_node_fraction / self.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "device"}
        d = self.device
        out["device"] = {
            "name": d.name,
            "peak_tflops": dict(d.peak_tflops),
            "hbm_GBps": d.hbm_GBps,
            "hbm_GB": d.hbm_GB,
            "sms": d.sms,
            "matmul_fraction": d.matmul_fraction,
            "matmul_fractions": dict(d.matmul_fractions),
            "gemm_fixed_s": d.gemm_fixed_s,
            "attn_fwd_fraction": d.attn_fwd_fraction,
            "attn_bwd_fraction": d.attn_bwd_fraction,
            "hbm_fraction": d.hbm_fraction,
            "compute_factor": d.compute_factor,
            "basis": dict(d.basis),
        }
        return out

    def scaled(
        self,
        compute: float = 1.0,
        hbm_capacity: float = 1.0,
        hbm_bandwidth: float = 1.0,
        nvlink_domain: float = 1.0,
        nic: float = 1.0,
        nvlink_bandwidth: float = 1.0,
    ) -> Cluster:
        """This system with its figures scaled (the what-if knobs). ``nvlink_domain`` scales the
        GPUs per NVLink domain (node) keeping each GPU's NIC share."""
        for k, v in locals().items():
            if k != "self" and not v > 0:
                raise PlanError(f"what-if factor {k} must be > 0, got {v}")
        d = self.device
        dev = replace(
            d,
            peak_tflops={p: v * compute for p, v in d.peak_tflops.items()},
            hbm_GB=d.hbm_GB * hbm_capacity,
            hbm_GBps=d.hbm_GBps * hbm_bandwidth,
        )
        g = max(1, round(self.gpus_per_node * nvlink_domain))
        return replace(
            self,
            device=dev,
            gpus_per_node=g,
            intra_node_GBps=self.intra_node_GBps * nvlink_bandwidth,
            inter_node_Gbps=self.inter_node_Gbps * nic * g / self.gpus_per_node,
        )


def _device_table_figures(gpu: str) -> dict[str, Any]:
    """The device table's figures of ``gpu`` (``stallscope.predict.device``: dense peaks per
    precision, HBM bandwidth and size, SMs); its CatalogError names the nearest GPUs."""
    from stallscope.predict import device

    dev = device(gpu)
    return {
        "name": dev.name,
        "peak_tflops": {k: float(v) for k, v in dev.peak_tflops.items() if v},
        "hbm_GBps": dev.memory_bandwidth_bytes_per_s / 1e9,
        "hbm_GB": dev.memory_gb,
        "sms": dev.sm_count or 0,
    }


def build_device(gpu: str, overrides: Mapping[str, Any], where: str) -> DeviceModel:
    """A DeviceModel for ``gpu``: the device table's figures, then ``overrides``, then the default
    efficiencies (plan/data/efficiency.json) or a measured table."""
    from stallscope.predict import CatalogError

    figures: dict[str, Any] = {}
    try:
        figures = _device_table_figures(gpu)
    except CatalogError as e:  # the table's own error names the nearest GPUs
        if not all(k in overrides for k in ("peak_tflops", "hbm_GBps", "hbm_GB")):
            raise PlanError(
                f"{where}: {e}; or give the GPU's figures in the system file: "
                '"peak_tflops": {"bf16": ...}, "hbm_GBps": ..., "hbm_GB": ...'
            ) from None
    peak = overrides.get("peak_tflops", figures.get("peak_tflops"))
    if isinstance(peak, (int, float)):
        peak = {"bf16": float(peak), "fp16": float(peak)}
    elif isinstance(peak, Mapping) and figures.get("peak_tflops"):  # over the table's own
        peak = dict(figures["peak_tflops"]) | dict(peak)
    hbm_bw = overrides.get("hbm_GBps", figures.get("hbm_GBps"))
    hbm_gb = overrides.get("hbm_GB", figures.get("hbm_GB"))
    if not peak or not hbm_bw or not hbm_gb:
        raise PlanError(
            f"{where}: GPU {gpu!r} lacks a figure the planner needs (dense peak, HBM bandwidth "
            'or size): give it in the system file: "peak_tflops": {"bf16": ...}, '
            '"hbm_GBps": ..., "hbm_GB": ...'
        )
    eff = efficiency_defaults()
    flash2 = attention_data()["fractions"]["flash2"]
    peaks = {str(k): float(v) for k, v in dict(peak).items()}
    sms = int(overrides.get("sms", figures.get("sms", 0)) or 0)
    hbm_fraction = float(eff["hbm_fraction"]["value"])
    fixed = float(eff["gemm_fixed_us"]["value"]) * 1e-6
    # by the table's own name: an alias ("NVIDIA A100-SXM4-80GB", torch's) finds its row too
    mamf = mamf_fractions(str(figures.get("name", gpu)), peaks, fixed)
    rates = matmul_rates()
    default = (float(rates["default_fraction"]), "")
    frac = mamf.get("bf16", mamf.get("fp16", default))[0]  # fp16: GPUs without bf16
    frac_basis = "; ".join(b for _, b in mamf.values()) or str(rates["default_fraction_basis"])
    fractions = {p: f for p, (f, _) in mamf.items()}
    if "matmul_fraction" in overrides:
        frac, frac_basis = float(overrides["matmul_fraction"]), f"given by {where}"
        fractions = {}
    dev = DeviceModel(
        name=str(figures.get("name", gpu)),
        peak_tflops=peaks,
        hbm_GBps=float(hbm_bw),
        hbm_GB=float(hbm_gb),
        sms=sms,
        matmul_fraction=frac,
        matmul_fractions=fractions,
        gemm_fixed_s=fixed,
        attn_fwd_fraction=float(flash2["fwd"]),
        attn_bwd_fraction=float(flash2["bwd"]),
        hbm_fraction=hbm_fraction,
        basis={
            "matmul": frac_basis,
            "attention": "published kernel rates (plan/data/attention.json); elsewhere "
            + str(flash2["basis"]),
            "hbm": str(eff["hbm_fraction"]["basis"]),
        },
    )
    table = overrides.get("efficiency_table")
    measured_on = dev.name
    if not table and (table := _shipped_table(dev.name)):
        measured_on = _table_gpu(table, dev.name)
    if table and measured_on.upper() != dev.name.upper():  # a table of the same die
        src = build_device(measured_on, {"efficiency_table": table}, where)
        dev = carried_over(src, dev)
    elif table:
        from stallscope.plan._trace_table import read_table

        doc = read_table(table, where)
        label = _label(table)
        dev = dev.calibrated(doc, label)
        if isinstance(doc, Mapping) and doc.get("layers"):
            from stallscope.plan._layer_fit import fit_layer_factor  # it builds on this module

            dev = fit_layer_factor(_keep_mamf_ratios(dev, fractions), doc["layers"], label)
    elif "matmul_fraction" not in overrides:
        public = gemm_tables(dev.name)
        for t in public:  # public shape tables of the GPU's family
            dev = _public_calibration(dev, t, where)
        # a public table or a MAMF (or the default) alone: best kernels in short bursts
        dev = _typical_public(dev) if public else _typical_shapes(dev)
    return _keep_mamf_ratios(dev, fractions)


@lru_cache(maxsize=1)
def typical_over_best() -> tuple[tuple[str, float], ...]:
    """Per precision, how far measured layer GEMMs run below a GPU's MAMF: a measured table's
    large-GEMM fraction (fitted over a model's layer shapes) over the fraction that reproduces
    its own GPU's MAMF (plan/data/efficiency.json ``typical_gemm``); empty without the
    shipped table."""
    eff = efficiency_defaults()
    gpu = str(eff["typical_gemm"]["measured_on"])
    if _shipped_table(gpu) is None:
        return ()
    dev = build_device(gpu, {}, "plan/data/efficiency.json typical_gemm")
    fixed = float(eff["gemm_fixed_us"]["value"]) * 1e-6
    mamf = mamf_fractions(dev.name, dev.peak_tflops, fixed)
    fitted = dev.matmul_fractions
    return tuple((p, fitted[p] / f) for p, (f, _) in sorted(mamf.items()) if p in fitted)


@lru_cache(maxsize=1)
def typical_over_public() -> float | None:
    """How far measured layer GEMMs run below a public shape table of the same die (bf16): the
    shipped table's large-GEMM fraction on typical_gemm's GPU over the fraction its family's
    public table (gemm_tables.json) fits; None without both."""
    gpu = str(efficiency_defaults()["typical_gemm"]["measured_on"])
    tables = gemm_tables(gpu)
    if _shipped_table(gpu) is None or not tables:
        return None
    measured = build_device(gpu, {}, "plan/data/efficiency.json typical_gemm")
    public = _public_calibration(replace(measured, matmul_fractions={}), tables[0], "typical")
    return measured.matmul_fractions["bf16"] / public.matmul_fraction


def _typical_public(dev: DeviceModel) -> DeviceModel:
    """``dev``, whose bf16 GEMM fraction a public shape table fitted, at the rate measured layer
    GEMMs reach: times ``typical_over_public`` (the other precisions follow bf16 by their MAMF
    ratio, ``_keep_mamf_ratios``)."""
    ratio = typical_over_public()
    if ratio is None:
        return dev
    gpu = efficiency_defaults()["typical_gemm"]["measured_on"]
    note = f"; x {ratio:.3f}: a measured table's GEMMs over its die's public table, {gpu} "
    return _times(dev, lambda p: ratio, note + "(typical_gemm)")


def _typical_shapes(dev: DeviceModel) -> DeviceModel:
    """``dev``, whose GEMM fractions are its best shape's (MAMF, or the default taken from
    one), at the rate measured layer GEMMs reach: each fraction times ``typical_over_best``'s
    ratio for its precision (fp16 and those without one: bf16's)."""
    ratios = dict(typical_over_best())
    if "bf16" not in ratios:
        return dev
    gpu = efficiency_defaults()["typical_gemm"]["measured_on"]

    def r(p: str) -> float:
        return ratios.get(p, ratios["bf16"])

    each = ", ".join(f"{r(p):.3f} ({p})" for p in sorted(ratios))
    note = f"; x {each}: a measured table's GEMMs over its own GPU's MAMF, {gpu} (typical_gemm)"
    return _times(dev, r, note)


def _times(dev: DeviceModel, ratio: Callable[[str], float], note: str) -> DeviceModel:
    """``dev`` with each precision's GEMM fraction times ``ratio(precision)`` (the default
    fraction bf16's) and ``note`` added to its matmul basis."""
    basis = dict(dev.basis) | {"matmul": dev.basis["matmul"] + note}
    return replace(
        dev,
        matmul_fraction=dev.matmul_fraction * ratio("bf16"),
        matmul_fractions={p: f * ratio(p) for p, f in dev.matmul_fractions.items()},
        basis=basis,
    )


def _public_calibration(dev: DeviceModel, t: Mapping[str, Any], where: str) -> DeviceModel:
    """``dev`` with the GEMM fraction and fixed time a public shape table gives, fitted on the
    GPU the table was measured on and carried over to ``dev`` (a GPU of the same die)."""
    rows = [{"op": "gemm", "dtype": t["dtype"], **r} for r in t["rows"]]
    source = str(t["source"]["url"])
    measured = str(t["measured_on"])
    if dev.name.upper() == measured.upper():
        return dev.calibrated(rows, source, shapes=False)
    fit = build_device(measured, {"matmul_fraction": 0.0}, where).calibrated(
        rows, source, shapes=False
    )
    # A GPU of the die at other clocks (GB200 over B200) scales the fit by the two GPUs' MAMF
    # fractions: their best shapes say how much of its own peak each one reaches.
    own = mamf_fractions(dev.name, dev.peak_tflops, fit.gemm_fixed_s).get("bf16")
    src = mamf_fractions(measured, fit.peak_tflops, fit.gemm_fixed_s).get("bf16")
    scale = own[0] / src[0] if own and src else 1.0
    note = f", measured on {measured}"
    if abs(scale - 1.0) > 1e-9:
        note += f", x {scale:.3f} (MAMF fractions {dev.name} / {measured})"
    basis = dict(dev.basis) | {"matmul": fit.basis["matmul"] + note}
    # the other precisions: their MAMF ratio to bf16 (_keep_mamf_ratios)
    fractions = {p: f * scale for p, f in fit.matmul_fractions.items()}
    return replace(
        dev,
        matmul_fraction=fit.matmul_fraction * scale,
        matmul_fractions=fractions,
        gemm_fixed_s=fit.gemm_fixed_s,
        basis=basis,
    )


def _keep_mamf_ratios(dev: DeviceModel, mamf: Mapping[str, float]) -> DeviceModel:
    """After a table calibrated some precisions (bf16), the others keep their MAMF ratio to
    bf16 (an fp8 measurement at the best shape, applied to the table's bf16 fit)."""
    fitted = dict(dev.matmul_fractions)
    if "bf16" not in fitted or "bf16" not in mamf or fitted["bf16"] == mamf["bf16"]:
        return dev
    extra = {p: fitted["bf16"] * f / mamf["bf16"] for p, f in mamf.items() if p not in fitted}
    if not extra:
        return dev
    basis = dict(dev.basis)
    basis["matmul"] += "; " + ", ".join(
        f"{p} {f:.3f} (its MAMF ratio to bf16 on the fitted bf16)" for p, f in extra.items()
    )
    return replace(dev, matmul_fractions=fitted | extra, basis=basis)


def _shipped_table(gpu: str) -> Path | None:
    """A measured efficiency table shipped for ``gpu`` or a GPU of the same compute die and
    clocks (``predict/data/efficiency/<GPU>.json``; families in plan/data/efficiency.json)."""
    folder = _TABLES
    if not folder.is_dir():
        return None
    names = [gpu.upper()]
    for family in efficiency_defaults().get("table_families", {}).get("families", []):
        if any(gpu.upper().startswith(f.upper()) for f in family):
            names += [f.upper() for f in family]
    tables = sorted(folder.glob("*.json"))
    for name in names:  # the GPU's own table first, then its family's
        for f in tables:
            if name.startswith(f.stem.upper()):
                return f
    return None


def _label(table: Any) -> str:
    """How a basis names a table: a shipped one by its place in the package."""
    if isinstance(table, Path) and table.parent == _TABLES:
        return f"stallscope/predict/data/efficiency/{table.name}"
    return "the given table" if isinstance(table, (dict, list)) else str(table)


def _table_gpu(table: Path, gpu: str) -> str:
    """The GPU of ``gpu``'s die family a shipped table was measured on (its file's stem)."""
    stem = table.stem.upper()
    for family in efficiency_defaults()["table_families"]["families"]:
        if any(gpu.upper().startswith(f.upper()) for f in family):
            for f in family:
                if f.upper().startswith(stem):
                    return str(f)
    return gpu


def carried_over(src: DeviceModel, dev: DeviceModel) -> DeviceModel:
    """``dev`` with the efficiencies measured on ``src``, a GPU of the same compute die: GEMM and
    attention rates as fractions of each GPU's own peaks (equal across the family: the
    datasheets' dense peaks are the same), the copy rate as a fraction of each GPU's own HBM
    bandwidth, the measured layer's factor as a ratio over each GPU's own modelled layer
    (whose memory-bound kernels run at that GPU's bandwidth)."""
    note = (
        f"; measured on {src.name}, carried over to {dev.name} (same die, SMs and dense peaks; "
        f"HBM {dev.hbm_GBps:.0f} GB/s vs {src.hbm_GBps:.0f}: plan/data/efficiency.json "
        "table_families)"
    )
    peaks = {p: dev.peak_tflops.get(p, v) / v for p, v in src.peak_tflops.items() if v}
    scale = peaks.get("bf16", 1.0)  # attention in 16 bit: the fraction keeps the rate's ratio
    mamf = _mamf_scales(src, dev)
    if mamf:
        note += "; x " + ", ".join(f"{f:.3f} ({p})" for p, f in sorted(mamf.items()))
        note += f" (MAMF fractions {dev.name} / {src.name})"

    def gemm(p: str) -> float:
        return mamf.get(p, mamf.get("bf16", 1.0))

    return replace(
        dev,
        matmul_fraction=src.matmul_fraction * gemm("bf16"),
        matmul_fractions={p: f * gemm(p) for p, f in src.matmul_fractions.items()},
        gemm_fixed_s=src.gemm_fixed_s,
        attn_fwd_fraction=src.attn_fwd_fraction,
        attn_bwd_fraction=src.attn_bwd_fraction,
        hbm_fraction=src.hbm_fraction,
        attention_measured=src.attention_measured,
        attention_curves={
            k: (xs, tuple(y * scale for y in ys)) for k, (xs, ys) in src.attention_curves.items()
        },
        layer_factor=src.layer_factor,
        gemm_shapes=src.gemm_shapes,
        sustained=src.sustained,  # the same die (H100 SXM and H200: both at 700 W)
        basis={k: v + note for k, v in src.basis.items()},
    )


def _mamf_scales(src: DeviceModel, dev: DeviceModel) -> dict[str, float]:
    """Per precision, ``dev``'s MAMF fraction over ``src``'s where their MAMF entries differ:
    GPUs of one die under other power limits or memories (H100 and H200 at 700 W with HBM3
    and HBM3e, GH200's 900 W module) sustain different clocks, and their best shapes say by
    how much."""
    fixed = src.gemm_fixed_s
    own = mamf_fractions(dev.name, dev.peak_tflops, fixed)
    base = mamf_fractions(src.name, src.peak_tflops, fixed)
    return {
        p: own[p][0] / base[p][0]
        for p in own
        if p in base and abs(own[p][0] / base[p][0] - 1.0) > 1e-9
    }


def system_from_dict(doc: Mapping[str, Any], name: str = "custom") -> Cluster:
    """A Cluster from a system file's keys."""
    where = f"system {doc.get('name', name)!r}"
    missing = [k for k in _REQUIRED if k not in doc]
    if missing:
        raise PlanError(
            f"{where} lacks {listed(missing)}: a system file needs at least "
            '{"gpu": "A100-80GB", "gpus_per_node": 8, "intra_node_GBps": 300, '
            '"inter_node_Gbps": 1600}'
        )
    known = {*_REQUIRED, *_DEVICE_KEYS, *_INFORMATIVE, *_LINK_KEYS, "name", "compute_factor"}
    unknown = [k for k in doc if k not in known]
    if unknown:
        hints = "; ".join(f"{u!r} (nearest: {listed(nearest_names(u, known, 2))})" for u in unknown)
        raise PlanError(f"{where}: unknown keys {hints}")
    check_figures(doc, where)
    if int(doc["gpus_per_node"]) != doc["gpus_per_node"]:
        raise PlanError(f"{where}: gpus_per_node must be a whole number")
    eff = efficiency_defaults()
    lat = eff["latency_us"]
    measured_ar, measured_copy = _intra_fractions(str(doc["gpu"]))
    intra_ar = float(doc.get("intra_node_fraction", measured_ar))
    # a given all-reduce fraction stands for every collective unless the copy one is given too
    intra_copy = intra_ar if "intra_node_fraction" in doc else measured_copy
    return Cluster(
        name=str(doc.get("name", name)),
        gpu=str(doc["gpu"]),
        gpus_per_node=int(doc["gpus_per_node"]),
        intra_node_GBps=float(doc["intra_node_GBps"]),
        inter_node_Gbps=float(doc["inter_node_Gbps"]),
        device=anchored(
            build_device(str(doc["gpu"]), doc, where), float(doc.get("compute_factor", 1))
        ),
        intra_node_fraction=intra_ar,
        intra_node_copy_fraction=float(doc.get("intra_node_copy_fraction", intra_copy)),
        inter_node_fraction=float(
            doc.get("inter_node_fraction", eff["inter_node_fraction"]["value"])
        ),
        base_latency_s=float(lat["base"]) * 1e-6,
        nvlink_hop_s=float(doc.get("intra_node_latency_us", lat["nvlink_hop"])) * 1e-6,
        network_hop_s=float(doc.get("inter_node_latency_us", lat["network_hop"])) * 1e-6,
    )


def anchored(dev: DeviceModel, factor: float) -> DeviceModel:
    """``dev`` with its GEMMs and attention at ``factor`` x its rate (a system file's
    ``compute_factor``, found by ``stallscope.plan.anchor`` from a measured step)."""
    if factor == dev.compute_factor:
        return dev
    basis = {
        **dev.basis,
        "compute": f"GEMMs and attention at {factor:.3f} x the device model's rate "
        "(compute_factor: anchored on a measured step)",
    }
    return replace(dev, compute_factor=factor, basis=basis)


def _intra_fractions(gpu: str) -> tuple[float, float]:
    """NCCL's bus bandwidth over the NVLink rate inside a node, (all-reduce, all-gather /
    reduce-scatter / send): measured for the GPU's family (efficiency.json
    ``intra_node_fraction.by_gpu``, or its ``also`` list of GPUs on the same links; ``copy``
    where NVLink SHARP speeds up all-reduce alone), else the default measurement for both."""
    entry = efficiency_defaults()["intra_node_fraction"]
    by_gpu: dict[str, dict[str, Any]] = entry.get("by_gpu", {})
    for name in family_names(gpu):
        for fam, v in by_gpu.items():
            also = [str(a).upper() for a in v.get("also", [])]  # same links, no measurement
            if name.startswith(fam.upper()) or any(name.startswith(a) for a in also):
                ar = float(v["value"])
                return ar, float(v.get("copy", {}).get("value", ar))
    return float(entry["value"]), float(entry["value"])


def load_system(
    source: Cluster | Mapping[str, Any] | str | Path, efficiency_table: Any = None
) -> Cluster:
    """A Cluster from a Cluster, a dict, a JSON file's path or a preset's name;
    ``efficiency_table`` (a measured table or a PyTorch profiler trace: a path or its JSON)
    calibrates its GPU in place of the system's own table."""
    if isinstance(source, Cluster):
        if efficiency_table is not None:
            raise PlanError(
                "an efficiency table calibrates a system given by name, file or dict, not a "
                "built Cluster: pass the system's name or its dict"
            )
        return source
    doc, name = system_doc(source)
    if efficiency_table is not None:
        doc["efficiency_table"] = efficiency_table
    return system_from_dict(doc, name=name)


def system_doc(source: Mapping[str, Any] | str | Path) -> tuple[dict[str, Any], str]:
    """A system given by its keys, a JSON file's path or a preset's name, as a system file's
    keys and the name it goes by."""
    if isinstance(source, Mapping):
        return dict(source), "custom"
    if (path := Path(source)).suffix == ".json" or path.exists():
        from stallscope.plan._model import _read_json

        return dict(_read_json(path, "system")), path.stem
    return preset_doc(str(source)), str(source)


def cluster_of_preset(name: str) -> Cluster:
    """The Cluster of a system preset (``stallscope.plan.system(name)``: a DGX, a Selene node, a
    cloud instance, with its sources)."""
    return system_from_dict(preset_doc(name))


def preset_doc(name: str) -> dict[str, Any]:
    """A system preset as a system file's keys."""
    from stallscope.plan._systems import system
    from stallscope.predict import CatalogError

    try:
        p = system(name)
    except CatalogError as e:
        raise PlanError(f"{e}; or give a system JSON file") from None
    from stallscope.predict import link

    return {
        "name": p.name,
        "gpu": p.gpu,
        "gpus_per_node": p.gpus_per_node,
        "intra_node_GBps": p.intra_node_bytes_per_s / 1e9,
        "inter_node_Gbps": p.inter_node_bytes_per_s * 8 / 1e9,
        # the per-step latencies NCCL's tuner assumes for the preset's links (links.json)
        "intra_node_latency_us": link(p.intra_node_link).latency_us,
        "inter_node_latency_us": link(p.inter_node_link).latency_us,
    }
