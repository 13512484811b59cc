"""The device table: every figure sourced and dated, peaks dense and in a plausible order, names
and aliases resolving, unknown names answered with the nearest known ones."""

from __future__ import annotations

import itertools
import re

import polars as pl
import pytest

from stallscope.exceptions import StallscopeError
from stallscope.predict import PRECISIONS, CatalogError, device, device_names, devices, link
from stallscope.predict._catalog import NameIndex, load_entries
from stallscope.predict._devices import _parse

DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
FIGURES = ("memory_gb", "memory_bandwidth_GBps", "sm_count", "l2_mb", "board_power_w")
REQUIRED = {
    "V100-SXM2-16GB", "V100-SXM2-32GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM",
    "H100-PCIe", "H200-SXM", "B200", "L4", "A10G", "T4", "MI300X", "L40S", "A10",
}  # fmt: skip


def test_every_asked_for_device_is_there() -> None:
    assert set(device_names()) >= REQUIRED


@pytest.mark.parametrize("name", device_names())
def test_every_figure_has_a_dated_source(name: str) -> None:
    d = device(name)
    fields = [f for f in FIGURES if getattr(d, _attr(f)) is not None]
    if d.peak_tflops:
        fields.append("peak_tflops")
    for f in fields:
        src = d.source(f)
        assert src.url.startswith(("https://", "http://")), (name, f)
        assert DATE.match(src.date), (name, f, src.date)
        assert all(c.startswith(("https://", "http://")) for c in src.checked_via)
    # A figure left out is explained.
    if not d.peak_tflops or d.sm_count is None or d.board_power_w is None:
        assert d.notes


def _attr(field: str) -> str:
    return {"memory_bandwidth_GBps": "memory_bandwidth_bytes_per_s"}.get(field, field)


@pytest.mark.parametrize("name", device_names())
def test_figures_are_in_plausible_units(name: str) -> None:
    d = device(name)
    assert 8 <= d.memory_gb <= 300  # GB per accelerator
    assert 100e9 <= d.memory_bandwidth_bytes_per_s <= 10e12  # bytes/s
    assert d.sm_count is None or 20 <= d.sm_count <= 400
    assert d.board_power_w is None or 50 <= d.board_power_w <= 1500  # W
    assert set(d.peak_tflops) <= set(PRECISIONS)
    for p, v in d.peak_tflops.items():
        assert 1 <= v <= 20_000, (name, p, v)
    # Tensor-core peaks above the non-tensor FP32 rate, lower precision never slower.
    fp32 = d.peak_tflops.get("fp32")
    for p in ("tf32", "fp16", "bf16", "fp8", "fp4"):
        if fp32 is not None and p in d.peak_tflops:
            assert d.peak_tflops[p] > fp32, (name, p)
    order = [p for p in ("tf32", "bf16", "fp8", "fp4") if p in d.peak_tflops]
    assert all(d.peak_tflops[a] < d.peak_tflops[b] for a, b in itertools.pairwise(order))
    if d.intra_node_link is not None:
        assert link(d.intra_node_link).tier == "intra"


def test_generations_rank_as_expected() -> None:
    v100, a100, h100 = device("V100-SXM2-32GB"), device("A100-SXM4-80GB"), device("H100-SXM")
    assert h100.peak_flops("fp16") > a100.peak_flops("fp16") > v100.peak_flops("fp16")
    assert h100.peak_flops("fp32") > a100.peak_flops("fp32") > v100.peak_flops("fp32")
    assert (
        device("B200").memory_bandwidth_bytes_per_s
        > device("H200-SXM").memory_bandwidth_bytes_per_s
        > h100.memory_bandwidth_bytes_per_s
        > a100.memory_bandwidth_bytes_per_s
        > v100.memory_bandwidth_bytes_per_s
    )
    assert device("B200").peak_flops("bf16") > h100.peak_flops("bf16")
    # H200 is H100's compute with more, faster memory; the PCIe card is slower than the SXM one.
    assert device("H200-SXM").peak_tflops == h100.peak_tflops
    assert device("H200-SXM").memory_gb > h100.memory_gb
    assert device("H100-PCIe").peak_flops("bf16") < h100.peak_flops("bf16")
    assert device("A100-SXM4-40GB").peak_tflops == a100.peak_tflops
    assert device("L4").board_power_w is not None and device("L4").board_power_w < 100


def test_peaks_are_dense_not_the_sparse_datasheet_figures() -> None:
    # The dense figures are those NVIDIA and AMD use themselves to compute MFU (989 TFLOP/s
    # bf16 on H100 in NVIDIA's dgxc-benchmarking, 312 on A100 in Megatron's papers); the
    # datasheets' headline sparse figures are twice that. bench/data's test checks each
    # published MFU against these peaks.
    assert device("H100").peak_flops("bf16") == pytest.approx(989e12, rel=0.001)
    assert device("H100").peak_flops("fp8") == pytest.approx(1979e12, rel=0.001)
    assert device("A100-80GB").peak_flops("bf16") == pytest.approx(312e12)


def test_peak_flops_units_and_errors() -> None:
    assert device("T4").peak_flops("fp16") == pytest.approx(65e12)
    with pytest.raises(CatalogError, match=r"T4 has no sourced bf16 peak \(it has: fp32, fp16\)"):
        device("T4").peak_flops("bf16")
    with pytest.raises(CatalogError, match=r"unknown precision 'fp12'; use one of fp64"):
        device("T4").peak_flops("fp12")
    with pytest.raises(CatalogError, match="no sourced"):
        device("A10G").peak_flops("fp16")


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("H100", "H100-SXM"),
        ("h100-sxm", "H100-SXM"),
        ("H100-80GB", "H100-SXM"),
        ("h100 sxm", "H100-SXM"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("h100_80gb", "H100-SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("a100_40gb", "A100-SXM4-40GB"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
        ("mi300x", "MI300X"),
        ("AMD Instinct MI300X", "MI300X"),
        ("l40s", "L40S"),
        ("  t4 ", "T4"),
        ("NVIDIA A100-PG509-200", "A100-SXM4-40GB"),  # as a Kineto trace of one reports it
        ("NVIDIA PG509-210", "A100-SXM4-80GB"),
    ],
)
def test_aliases_resolve_case_and_separator_insensitively(alias: str, name: str) -> None:
    assert device(alias).name == name


def test_unknown_name_lists_the_nearest_known_ones() -> None:
    with pytest.raises(CatalogError) as err:
        device("H10")
    msg = str(err.value)
    assert msg.startswith("unknown device 'H10' (nearest: H100-SXM")
    assert "devices.json" in msg
    assert isinstance(err.value, StallscopeError)
    # A prefix of several devices is ambiguous: both A100 sizes are offered first.
    with pytest.raises(CatalogError, match=r"nearest: A100-SXM4-40GB, A100-SXM4-80GB"):
        device("A100")
    with pytest.raises(CatalogError, match="no close name"):
        device("zzzzzzzzzz")


def test_frame_has_one_typed_row_per_device() -> None:
    df = devices()
    assert df.height == len(device_names()) and df["name"].n_unique() == df.height
    assert df.schema["peak_bf16_tflops"] == pl.Float64
    assert df.schema["sm_count"] == pl.Int64
    assert df.schema["aliases"] == pl.List(pl.String)
    h100 = df.filter(pl.col("name") == "H100-SXM").row(0, named=True)
    assert h100["memory_bandwidth_GBps"] == pytest.approx(3350)
    assert h100["peak_fp8_tflops"] == pytest.approx(1979)
    assert df.filter(pl.col("name") == "T4")["peak_bf16_tflops"].is_null().all()
    assert df["source_url"].is_not_null().all() and df["source_date"].is_not_null().all()


ANY_SOURCE = {"url": "https://e.com", "date": "2020"}


def _entry(**changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "name": "X1",
        "vendor": "ACME",
        "peak_tflops": {"bf16": 100},
        "memory_gb": 10,
        "memory_bandwidth_GBps": 500,
        "sources": {"default": {"url": "https://example.com/x1.pdf", "date": "2025-01-02"}},
    }
    entry.update(changes)
    return entry


def test_bad_entries_are_refused_with_the_field_named() -> None:
    assert _parse(_entry(), 0).peak_flops("bf16") == 100e12
    with pytest.raises(
        CatalogError, match=r"device 'X1': no source for \['peak_tflops', 'memory_gb'"
    ):
        _parse(_entry(sources={"memory_bandwidth_GBps": ANY_SOURCE}), 0)
    with pytest.raises(CatalogError, match="source date must be YYYY-MM-DD"):
        _parse(_entry(sources={"default": {"url": "https://e.com", "date": "May 2020"}}), 0)
    with pytest.raises(CatalogError, match="source url must be an http"):
        _parse(_entry(sources={"default": {"url": "datasheet.pdf", "date": "2020"}}), 0)
    with pytest.raises(CatalogError, match=r"peak_tflops has unknown key 'bf17'"):
        _parse(_entry(peak_tflops={"bf17": 1}), 0)
    with pytest.raises(CatalogError, match=r"field 'memory_gb' must be a positive number, got -1"):
        _parse(_entry(memory_gb=-1), 0)
    with pytest.raises(CatalogError, match=r"sources for unknown fields \['colour'\]"):
        _parse(_entry(sources={"default": ANY_SOURCE, "colour": ANY_SOURCE}), 0)
    with pytest.raises(CatalogError, match=r"intra_node_link: unknown link 'nvlink9'"):
        _parse(_entry(intra_node_link="nvlink9"), 0)


def test_duplicate_names_and_missing_files_are_refused() -> None:
    with pytest.raises(CatalogError, match=r"'A_B' names both 'A' and 'B'"):
        NameIndex("device", "x.json", [("A", ["a-b"]), ("B", ["A_B"])])
    with pytest.raises(
        CatalogError, match=r"catalog stallscope/predict/data/nope\.json is missing"
    ):
        load_entries("stallscope.predict", "nope.json", "devices")
