"""System presets: GPUs and links that exist, bandwidths that agree with the link table."""

from __future__ import annotations

import polars as pl
import pytest

from stallscope.plan import system, system_names, systems
from stallscope.predict import CatalogError, device, link

REQUIRED = {"dgx-a100", "dgx-h100", "dgx-h200", "selene-node", "eos-node"}


def test_every_asked_for_system_is_there() -> None:
    assert set(system_names()) >= REQUIRED


@pytest.mark.parametrize("name", system_names())
def test_system_agrees_with_the_device_and_link_tables(name: str) -> None:
    s = system(name)
    assert device(s.gpu).name == s.gpu
    assert s.gpus_per_node in (8, 72)  # an 8-GPU board, or a rack-wide NVLink domain (NVL72)
    intra, inter = link(s.intra_node_link), link(s.inter_node_link)
    assert intra.tier == "intra" and inter.tier == "inter"
    # Inside: the per-GPU bandwidth of the fabric.
    assert intra.per == "gpu" and s.intra_node_bytes_per_s == pytest.approx(intra.bytes_per_s)
    # Across: all compute ports of the node, or the cloud network's per-node figure.
    if inter.per == "port":
        assert s.inter_node_bytes_per_s == pytest.approx(s.nics_per_node * inter.bytes_per_s)
    else:
        assert inter.per == "node"
        assert s.inter_node_bytes_per_s == pytest.approx(inter.bytes_per_s)
        assert s.nics_per_node == inter.nics_per_node
    for field in ("gpu", "intra_node_GBps", "inter_node_Gbps"):
        assert s.source(field).url.startswith("https://")


def test_the_generations_asked_for() -> None:
    a100, h100 = system("DGX A100"), system("dgx-h100")
    assert a100.intra_node_bytes_per_s == 300e9 and a100.inter_node_bytes_per_s * 8 == 1600e9
    assert h100.intra_node_bytes_per_s == 450e9 and h100.inter_node_bytes_per_s * 8 == 3200e9
    assert system("Selene").gpu == "A100-SXM4-80GB" and system("Eos").gpu == "H100-SXM"
    assert system("dgx-h200").gpu == "H200-SXM"


def test_unknown_system_and_frame() -> None:
    with pytest.raises(CatalogError, match=r"unknown system 'dgx-h300' \(nearest: dgx-h"):
        system("dgx-h300")
    df = systems()
    assert df.height == len(system_names())
    assert df.filter(pl.col("name") == "aws-p4d.24xlarge")["inter_node_Gbps"].item() == 400
