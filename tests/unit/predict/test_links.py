"""The link table: tiers, units per direction, generations in order, every figure sourced."""

from __future__ import annotations

import re

import polars as pl
import pytest

from stallscope.predict import CatalogError, link, link_names, links

DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
REQUIRED = {
    "nvlink2", "nvlink3", "nvlink4", "nvlink5", "nvswitch-gen1", "nvswitch-gen2",
    "nvswitch-gen3", "nvswitch-gen4", "pcie3-x16", "pcie4-x16", "pcie5-x16", "ib-edr",
    "ib-hdr", "ib-ndr", "ib-xdr", "aws-efa-p4d", "aws-efa-p5", "gcp-a3-high-tcpx",
    "gcp-a3-mega-tcpxo", "azure-ndv4-hdr", "azure-ndv5-ndr", "ethernet-10g", "ethernet-25g",
    "ethernet-40g", "ethernet-100g", "ethernet-200g", "ethernet-400g",
}  # fmt: skip


def test_every_asked_for_link_is_there() -> None:
    assert set(link_names()) >= REQUIRED


@pytest.mark.parametrize("name", link_names())
def test_every_link_is_sourced_and_dated(name: str) -> None:
    x = link(name)
    for field in ("GBps_per_direction", "latency_us"):
        src = x.source(field)
        assert src.url.startswith(("https://", "http://")) and DATE.match(src.date)
    if x.latency_kind == "nccl-tuner":
        assert "github.com/NVIDIA/nccl/blob/" in x.source("latency_us").url
    else:
        assert "NCCL" in x.notes  # an assumption says what it is taken from
    assert x.tier in ("intra", "inter") and x.nominal
    assert 1e9 <= x.bytes_per_s <= 1e12 and 0.1 <= x.latency_us <= 100


def _gbps(name: str) -> float:
    return link(name).bytes_per_s / 1e9


def test_generations_are_in_order_and_per_direction() -> None:
    nv = [_gbps(f"nvlink{g}") for g in (2, 3, 4, 5)]
    assert nv == [150, 300, 450, 900]  # vendors' bidirectional 300/600/900/1800 GB/s, halved
    assert [_gbps(f"nvswitch-gen{g}") for g in (1, 2, 3, 4)] == nv
    pcie = [_gbps(f"pcie{g}-x16") for g in (3, 4, 5)]
    assert pcie[1:] == pytest.approx([2 * pcie[0], 4 * pcie[0]], rel=1e-4)
    gen3 = 8e9 * 16 * 128 / 130 / 8  # bytes/s: 8 GT/s on 16 lanes, 128b/130b encoding
    assert pcie[0] == pytest.approx(gen3 / 1e9, rel=1e-4)
    ib = [_gbps(f"ib-{g}") for g in ("edr", "hdr", "ndr", "xdr")]
    assert ib == [12.5, 25, 50, 100]  # 100..800 Gb/s per 4x port
    for rate in (10, 25, 40, 100, 200, 400):
        assert _gbps(f"ethernet-{rate}g") == pytest.approx(rate / 8)
    assert {link(n).tier for n in ("nvlink4", "pcie5-x16")} == {"intra"}
    assert {link(n).tier for n in ("ib-ndr", "aws-efa-p5", "ethernet-100g")} == {"inter"}


def test_cloud_networks_are_per_node_and_spread_over_gpus() -> None:
    p4d, p5 = link("aws-efa-p4d"), link("aws-efa-p5")
    assert p4d.per == p5.per == "node"
    assert p4d.bytes_per_s * 8 == pytest.approx(400e9)  # 4 x 100 Gbps
    assert p5.bytes_per_s * 8 == pytest.approx(3200e9)
    df = links().filter(pl.col("per") == "node")
    assert (df["GBps_per_gpu"] * 8 == df["GBps_per_direction"]).all()
    # Azure: one HDR / NDR port per GPU.
    assert link("azure-ndv4-hdr").bytes_per_s / 8 == pytest.approx(link("ib-hdr").bytes_per_s)
    assert link("azure-ndv5-ndr").bytes_per_s / 8 == pytest.approx(link("ib-ndr").bytes_per_s)


def test_aliases_and_unknown_names() -> None:
    assert link("NVLink 4").name == "nvlink4"
    assert link("NDR").name == "ib-ndr"
    assert link("PCIe Gen4").name == "pcie4-x16"
    assert link("100GbE").name == "ethernet-100g"
    with pytest.raises(CatalogError, match=r"unknown link 'nvlink' \(nearest: nvlink2, nvlink3"):
        link("nvlink")


def test_frame() -> None:
    df = links()
    assert df.height == len(link_names())
    assert df.schema["GBps_per_gpu"] == pl.Float64
    assert df.filter(pl.col("per") == "port")["GBps_per_gpu"].is_null().all()
    assert df.filter(pl.col("name") == "nvlink4")["GBps_per_gpu"].item() == 450


def test_nccl_efficiency_is_sourced_and_applied() -> None:
    for name in ("nvlink4", "nvswitch-gen3"):
        x = link(name)
        assert x.efficiency == 0.82 and x.effective_bytes_per_s == pytest.approx(0.82 * 450e9)
        assert "nccl-tests/issues/212" in x.source("efficiency").url
    assert link("ib-ndr").efficiency == 0.95
    assert link("ethernet-100g").efficiency == 1.0  # no source gives one: the line rate
    assert links().filter(pl.col("name") == "ib-hdr")["efficiency"].item() == 0.95


def _entry(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "test-link",
        "tier": "inter",
        "per": "port",
        "GBps_per_direction": 10,
        "nominal": "a test link",
        "latency_us": 14.0,
        "latency_kind": "assumption",
        "sources": {"default": {"url": "https://example.org/a", "date": "2026-01-01"}},
    }
    base.update(extra)
    return base


def test_a_bad_efficiency_names_the_problem() -> None:
    from stallscope.predict._links import _parse

    ok = _parse(_entry(), 0)
    assert ok.efficiency == 1.0
    with pytest.raises(CatalogError, match=r"efficiency is a share of the line rate, <= 1"):
        _parse(_entry(efficiency=1.2), 0)
    with pytest.raises(CatalogError, match=r"an efficiency needs its own source"):
        _parse(_entry(efficiency=0.9), 0)
