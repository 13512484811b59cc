"""profile_of on real GPU Kineto traces of tests/data/kineto (NCCL): the H200 set, and the five
sets (V100, A100, DLRM on 8 V100, a sampled 128-rank job)."""

from __future__ import annotations

import warnings
from pathlib import Path

import orjson
import pytest

import stallscope.predict as sp

from .conftest import REPO_KINETO


def test_h200_single_rank_profile() -> None:
    p = sp.profile_of(REPO_KINETO / "h200_transformer_1rank")
    m = p.measured
    assert (m.ranks, m.backend, m.device) == (1, "nccl", "NVIDIA H200")
    assert p.source["kind"] == "kineto" and p.source["steps_used"] == 2  # 3 steps, 1 warm-up
    phases = {ph.phase: ph for ph in p.phases}
    assert set(phases) >= {"forward", "backward", "optimizer"}
    for ph in phases.values():
        assert ph.compute_ns > 0
        assert sum(ph.mix.values()) == pytest.approx(1.0)
        assert set(ph.mix) <= {"matmul", "memory"}
    assert phases["forward"].mix["matmul"] > 0  # the layer's GEMMs
    assert phases["optimizer"].mix == {"matmul": 0.0, "memory": 1.0}  # AdamW: elementwise
    assert p.buckets == [] and p.comm_overlap == 1.0
    # the profile's compute is the stall table's (kernels launched in the step)
    assert p.compute_ns == pytest.approx(m.stalls_ns["compute_ns"], rel=0.1)


def test_v100_ddp_buckets_come_from_nccl_kernels(kineto_data: Path) -> None:
    p = sp.profile_of(kineto_data / "hta_v100_rank1_of2_large")
    assert p.measured.device == "Tesla V100-SXM2-32GB"
    assert p.measured.ranks == 2
    assert len(p.buckets) == 404  # AllReduce kernels launched in each step's backward
    assert p.bytes_source == "estimated" and all(b.bytes == 0 for b in p.buckets)
    assert any("no bucket events" in n for n in p.notes)
    assert any("1 of 2 rank" in n for n in p.notes)
    readies = [b.ready_ns for b in p.buckets]
    assert readies == sorted(readies)
    assert 0 < readies[-1] <= p.phase("backward").compute_ns + 1
    assert all(b.measured_ns > 0 for b in p.buckets)


def test_a100_buckets_take_their_sizes_from_nccl_metadata(kineto_data: Path) -> None:
    p = sp.profile_of(kineto_data / "hta_a100_rank0_of2_ncclmeta")
    assert p.bytes_source == "measured"
    assert len(p.buckets) == 5 and all(b.bytes > 1_000_000 for b in p.buckets)
    assert {c.name for c in p.collectives} == {"broadcast"}  # DDP's buffer broadcasts
    assert all(c.group_size == 2 for c in p.collectives)


@pytest.mark.parametrize(
    ("name", "ranks", "nodes"),
    [("param_dlrm_8rank", 8, 1), ("hta_sampled_2rank", 128, 16), ("hta_a100_rank0_of16", 16, 2)],
)
def test_all_to_all_jobs(kineto_data: Path, name: str, ranks: int, nodes: int) -> None:
    p = sp.profile_of(kineto_data / name)
    assert p.measured.ranks == ranks
    assert p.measured.nodes == nodes  # placement assumed: 8 GPUs per node, and said so
    assert any("assumed" in n for n in p.notes)
    assert any(c.name == "send_recv" for c in p.collectives)  # NCCL's all-to-all kernels
    assert p.compute_ns > 0


def test_every_trace_set_names_a_device_of_the_table() -> None:
    """The GPU names the repository's trace sets report resolve (the manifest lists them)."""
    manifest = orjson.loads((REPO_KINETO / "MANIFEST.json").read_bytes())
    names = {g for s in manifest.values() for f in s["files"].values() for g in f["gpu"]}
    assert "NVIDIA A100-PG509-200" in names
    for name in names:
        assert sp.device(name).name  # CatalogError names the nearest if not


def test_the_pg509_a100_set_predicts_without_editing_the_profile(kineto_data: Path) -> None:
    p = sp.profile_of(kineto_data / "hta_a100_rank0_of2_ncclmeta")
    assert p.measured.device == "NVIDIA A100-PG509-200"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.PredictWarning)
        pred = sp.prediction(p, [sp.Target(1, 2), sp.Target(2, 2, network="ib-hdr", device="H100")])
    assert any("nvlink3" in line.lower() for line in pred.links)  # the A100's own NVLink
    same, other = pred.frame.iter_rows(named=True)
    assert same["compute_ns"] == pytest.approx(p.measured.stalls_ns["compute_ns"], rel=1e-6)
    assert other["compute_ns"] < same["compute_ns"]  # an H100 computes faster


def test_a_multi_node_run_without_sizes_needs_its_own_network(kineto_data: Path) -> None:
    """The A100 16-rank set's collectives carry no sizes: they are sized from their times on
    the measured network, which must be named; once named it also prices the targets."""
    p = sp.profile_of(kineto_data / "hta_a100_rank0_of16")
    assert p.measured.nodes == 2 and p.measured.network is None
    with pytest.raises(sp.PredictError, match="--measured-network"):
        sp.predict(p, sp.Target(1, 8))
    p.measured.network = "ib-hdr"
    again = sp.Profile.from_dict(orjson.loads(orjson.dumps(p.to_dict())))
    assert again.measured.network == "ib-hdr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.PredictWarning)
        frame = sp.predict(
            again, [sp.Target(1, 8), sp.Target(2, 8), sp.Target(2, 8, network="ib-ndr")]
        )
    one, two, ndr = frame.iter_rows(named=True)
    assert one["network_ns"] == 0 and two["network_ns"] > 0  # 2 nodes pay the network
    assert two["network"] == "ib-hdr" and ndr["network"] == "ib-ndr"
    assert ndr["network_ns"] < two["network_ns"]  # NDR is twice HDR's rate
    p.measured.network = "ib-nope"
    with pytest.raises(sp.PredictError, match="ib-nope"):
        sp.predict(p, sp.Target(1, 8))
