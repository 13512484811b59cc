"""The seam on the real predictor: shapes become Targets, compute moves between devices by the
device model (or by the ratio of achievable matmul rates for a CPU run standing for a GPU),
failures stay per shape."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from stallscope.analysis import STALL_COLUMNS
from stallscope.predict import Profile
from stallscope.recommend import RecommendError, Shape, recommendation
from stallscope.recommend._predictor_seam import PREDICTION_SCHEMA
from stallscope.recommend._profile_predictor import ProfilePredictor, predictor_for
from tests.unit.cli.test_recommend_cli import _PROFILE

MS = 1e6


def _gpu_profile(ranks: int = 2, buckets: bool = True) -> Profile:
    doc: dict[str, Any] = copy.deepcopy(_PROFILE)
    mix = {"matmul": 0.8, "memory": 0.2}
    doc["measured"] |= {"backend": "nccl", "device": "A100-SXM4-80GB", "precision": "bf16"}
    doc["measured"] |= {"ranks": ranks, "ranks_per_node": ranks}
    for ph in doc["phases"]:
        ph["mix"] = mix
    if not buckets:
        doc["buckets"] = []
    return Profile.from_dict(doc)


def test_a_cpu_run_needs_the_gpu_it_stands_for() -> None:
    cpu = Profile.from_dict(_PROFILE)
    with pytest.raises(RecommendError, match=r"measured on CPU threads.*--measured-device T4"):
        ProfilePredictor(cpu)
    with pytest.raises(RecommendError, match="unknown GPU 'Z80'"):
        ProfilePredictor(cpu, "Z80")
    with pytest.raises(RecommendError, match="unknown precision 'fp12'"):
        ProfilePredictor(cpu, "T4", "fp12")
    p = ProfilePredictor(cpu, "T4")
    assert p.measured_device == "T4" and p.measured_ranks == 2
    assert p.compute_scale("T4") == 1.0
    # fp32 matmul rates measured: T4 4.35 of its 8.1 TFLOP/s, H100 SXM 51.88 of 67
    assert p.compute_scale("H100-SXM") == pytest.approx(4.35 / 51.88)
    # a GPU without a measured fp32 rate: its peak times the default fraction
    assert p.compute_scale("A10") == pytest.approx(4.35 / (31.2 * 0.8))
    # the A10G has no published peak, but measured rates: 23.37 TFLOP/s in fp32
    assert p.compute_scale("A10G") == pytest.approx(4.35 / 23.37)
    with pytest.raises(
        RecommendError, match="H100-96GB-HBM2e has no sourced peak for dense fp32"
    ) as e:
        p.compute_scale("H100-96GB-HBM2e")
    assert "stallscope recommend --compute-scale H100-96GB-HBM2e=RATIO" in str(e.value)
    assert "stands for T4's" in p.basis


def test_a_gpu_run_scales_by_the_device_model() -> None:
    p = ProfilePredictor(_gpu_profile())
    assert p.measured_device == "A100-SXM4-80GB" and "device model" in p.basis
    assert p.compute_scale("A100-SXM4-80GB") == pytest.approx(1.0)
    assert (
        0.2 < p.compute_scale("H100-SXM") < 0.5
    )  # bf16 measured rates 271.2 -> 794.5, bandwidth 2039 -> 3350
    assert p.compute_scale("T4") > 3
    with pytest.raises(RecommendError, match="for runs on CPU threads"):
        ProfilePredictor(_gpu_profile(), "T4")


def test_predictions_line_up_and_fail_one_by_one() -> None:
    p = ProfilePredictor(Profile.from_dict(_PROFILE), "T4")
    shapes = [
        Shape("T4", 1, 1, 16.0, None),
        Shape("H100-96GB-HBM2e", 1, 1, 32.0, None),  # no peak, no rate: this one fails alone
        Shape("H100-SXM", 2, 8, 450.0, 3200.0),
        Shape("H100-SXM", 1, 8, 450.0, None),
    ]
    got = p.predict(shapes)
    assert got.columns == list(PREDICTION_SCHEMA) and got.height == 4
    assert got["problem"].to_list()[0] is None and "H100-96GB-HBM2e" in got["problem"][1]
    ok = got.filter(got["problem"].is_null())
    for row in ok.iter_rows(named=True):
        assert sum(row[c] for c in STALL_COLUMNS) == pytest.approx(row["step_ns"], rel=1e-6)
    one_t4, _two_nodes, one_node = ok["step_ns"].to_list()
    assert one_node < one_t4  # faster GPUs
    assert ok["network_ns"][1] > 0 and ok["network_ns"][2] == 0  # across nodes only


def test_a_one_rank_run_predicts_one_gpu_only() -> None:
    p = ProfilePredictor(_gpu_profile(ranks=1, buckets=False))
    got = p.predict([Shape("H100-SXM", 1, 1, 450.0, None), Shape("H100-SXM", 1, 8, 450.0, None)])
    assert got["problem"][0] is None
    assert "communication on several GPUs is unknown" in got["problem"][1]


def test_every_candidate_is_predicted_on_its_instances_own_links() -> None:
    p = ProfilePredictor(_gpu_profile())
    shapes = [
        Shape("A100-SXM4-80GB", 1, 4, 300.0, 100.0),  # NVLink
        Shape("A100-SXM4-80GB", 1, 4, 32.0, 100.0),  # the same GPUs over PCIe
        Shape("A100-SXM4-80GB", 2, 4, 300.0, 400.0),
        Shape("A100-SXM4-80GB", 2, 4, 300.0, 100.0),  # a slower network
    ]
    nvlink, pcie, fast, slow = p.predict(shapes).iter_rows(named=True)
    assert pcie["interconnect_ns"] > 2 * nvlink["interconnect_ns"] > 0
    assert pcie["step_ns"] > nvlink["step_ns"]
    assert slow["network_ns"] > 1.5 * fast["network_ns"] > 0
    # the links each target used are the catalog's figures
    targets = [p._target(s) for s in shapes]
    assert [(t.intra_node_GBps, t.inter_node_gbps) for t in targets] == [
        (300.0, None),
        (32.0, None),
        (300.0, 400.0),
        (300.0, 100.0),
    ]
    assert not p.predictor_notes  # nothing differs from what the catalog says


def test_recommendation_takes_a_saved_profile(tmp_path: Path) -> None:
    path = Profile.from_dict(_PROFILE).save(tmp_path / "job.json")
    catalog = tmp_path / "cat.csv"
    catalog.write_text(
        "cloud,region,instance,gpu,gpus,gpu_memory_gb,vcpus,memory_gb,intra_node_GBps,"
        "network_gbps,price_per_hour,spot_price_per_hour,source,date\n"
        "aws,r,t4.1x,T4,1,16,4,16,16,25,0.5,,https://example.com/p,2026-11-01\n"
        "aws,r,h100.8x,H100,8,80,192,2048,450,3200,55,,https://example.com/p,2026-11-01\n"
    )
    rec = recommendation(
        path, steps=100_000, time_budget="10h", catalog=catalog, measured_device="T4"
    )
    assert rec.best["instance"] in ("t4.1x", "h100.8x")
    assert predictor_for(path, "T4").measured_ranks == 2


def test_a_gpu_without_figures_is_fixed_with_recommends_own_option() -> None:
    """The reason names the option of the verb the user ran, and that option works."""
    gpu = "H100-96GB-HBM2e"  # no published peak and no measured matmul rate
    shapes = [Shape(gpu, 1, 1, 32.0, None), Shape(gpu, 1, 4, 32.0, None)]
    for p in (
        ProfilePredictor(_gpu_profile()),
        ProfilePredictor(Profile.from_dict(_PROFILE), "T4"),
    ):
        reason = p.predict(shapes)["problem"][0]
        assert f"{gpu} has no sourced peak" in reason
        assert f"stallscope recommend --compute-scale {gpu}=RATIO" in reason
        assert "Target.compute_scale" not in reason and "stallscope predict" not in reason
        with pytest.raises(RecommendError, match=f"--compute-scale {gpu}=RATIO"):
            p.compute_scale(gpu)
    given = ProfilePredictor(_gpu_profile(), compute_scales={gpu.lower(): 2.0})
    one, four = given.predict(shapes).iter_rows(named=True)
    assert one["problem"] is None and four["problem"] is None
    assert given.compute_scale(gpu) == 2.0 and f"{gpu} x2" in given.basis
    base = ProfilePredictor(_gpu_profile()).profile.compute_ns
    assert one["compute_ns"] == pytest.approx(2.0 * base, rel=1e-6)
    with pytest.raises(RecommendError, match="must be a positive number"):
        ProfilePredictor(_gpu_profile(), compute_scales={gpu: 0.0})
