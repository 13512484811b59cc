"""Every bad input gets a PredictError naming the problem and the fix; predictions beyond what
the profile and link figures support carry a PredictWarning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from stallscope.comm import Calibration
from stallscope.predict import (
    PredictError,
    PredictWarning,
    Profile,
    ProfileError,
    Target,
    predict,
    profile_of,
)

from .runs import CpuRun


def _cal(backend: str = "gloo", **extra: Any) -> Calibration:
    fits = [
        {
            "collective": "all_reduce",
            "tier": tier,
            "place": "in",
            "group_size": 2,
            "alpha_s": 0.0,
            "beta_s_per_byte": 1 / bw,
            "min_bytes": 65536,
            "max_bytes": 8 << 20,
        }
        for tier, bw in (("inter_node", 23e6), ("intra_node", 1e9))
    ]
    return Calibration(
        {
            "format": "stallscope.comm.calibration",
            "version": 1,
            "backend": backend,
            "fits": fits,
            **extra,
        },
        "cal.json",
    )


def test_no_step_markers() -> None:
    events = CpuRun().frame().filter(pl.col("kind") != "step")
    with pytest.raises(PredictError, match=r"no step markers.*stallscope\.step\(\).*ProfilerStep"):
        profile_of(events)


def test_no_compute() -> None:
    events = CpuRun().frame().filter(pl.col("kind") != "region")
    with pytest.raises(PredictError, match="no compute"):
        profile_of(events)


def test_no_collectives_for_a_multi_rank_prediction() -> None:
    prof = profile_of(CpuRun(buckets=[], collectives=False).frame())
    assert predict(prof, Target(1, 1)).height == 1  # one rank needs no communication
    with pytest.raises(PredictError, match=r"no gradient buckets or collectives.*--ranks 2"):
        predict(prof, Target(2, 1, 1e9))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0, "ranks_per_node": 1}, "nodes must be 1"),
        ({"nodes": 1, "ranks_per_node": 5000}, "ranks per node must be 1"),
        ({"nodes": 2, "ranks_per_node": 1, "rate_bps": 0.0}, "rate must be > 0"),
        ({"nodes": 2, "ranks_per_node": 1, "accumulation": 0}, "accumulation must be >= 1"),
        ({"nodes": 2, "ranks_per_node": 1, "strategy": "zero9"}, "unknown strategy 'zero9'"),
        ({"nodes": 2, "ranks_per_node": 1, "straggler_factor": 0.5}, "slowdown >= 1.0"),
        ({"nodes": 2, "ranks_per_node": 1, "straggler_ranks": 2}, "some ranks must be typical"),
        ({"nodes": 1, "ranks_per_node": 1, "compute_scale": -1.0}, "compute_scale must be > 0"),
        ({"nodes": "4", "ranks_per_node": 1}, "nodes must be a whole number, got '4'"),
        ({"nodes": 2, "ranks_per_node": 1.5}, "ranks_per_node must be a whole number"),
        ({"nodes": 2, "ranks_per_node": 1, "rate_bps": "1gbit"}, "rate_bps must be a number"),
    ],
)
def test_impossible_configurations(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PredictError, match=message):
        Target(**kwargs)


def test_a_target_that_is_not_a_target() -> None:
    prof = profile_of(CpuRun().frame())
    for wrong in ("4 nodes", 4, [Target(1, 1), (2, 1)]):
        with pytest.raises(PredictError, match=r"a target is a Target\(nodes, ranks_per_node"):
            predict(prof, wrong)  # type: ignore[arg-type]


def test_a_calibration_from_another_backend() -> None:
    prof = profile_of(CpuRun().frame())
    with pytest.raises(
        PredictError, match=r"measured with nccl, the run uses gloo.*--backend gloo"
    ):
        predict(prof, Target(2, 1), calibration=_cal("nccl"))


def test_calibration_files(tmp_path: Path) -> None:
    prof = profile_of(CpuRun().frame())
    with pytest.raises(PredictError, match="does not exist"):
        predict(prof, Target(2, 1), calibration=str(tmp_path / "none.json"))
    other = tmp_path / "other.json"
    other.write_text('{"format": "something else"}')
    with pytest.raises(PredictError, match="not a stallscope calibration file"):
        predict(prof, Target(2, 1), calibration=str(other))


def test_a_missing_inter_node_figure() -> None:
    prof = profile_of(CpuRun().frame())
    with pytest.raises(PredictError, match=r"across nodes.*--rate"):
        predict(prof, Target(2, 1))


def test_far_beyond_the_profile_warns() -> None:
    prof = profile_of(CpuRun().frame())
    with pytest.warns(PredictWarning, match=r"128 ranks is over 16x the 2 measured"):
        predict(prof, Target(64, 2, 1e9))


def test_sizes_outside_the_calibrated_range_warn() -> None:
    prof = profile_of(CpuRun(buckets=[(64 << 20, 20_000_000)]).frame())
    with pytest.warns(PredictWarning, match="outside the calibrated 65,536..8,388,608 B"):
        predict(prof, Target(2, 1), calibration=_cal())


def test_a_calibration_without_its_rate_cannot_be_rescaled() -> None:
    prof = profile_of(CpuRun().frame())
    with pytest.warns(PredictWarning, match="does not record its link rate"):
        predict(prof, Target(2, 1, 1e9), calibration=_cal())
    # recorded: rescaled from its rate, no warning
    cal = _cal(link={"rate_bps": 200e6, "mtu": 1500, "rate": "200mbit"})
    fast = predict(prof, Target(2, 1, 1e9), calibration=cal)["network_ns"].item()
    slow = predict(prof, Target(2, 1, 200e6), calibration=cal)["network_ns"].item()
    assert slow == pytest.approx(5 * fast, rel=0.02)


def test_cpu_compute_cannot_be_scaled_to_a_gpu_without_a_ratio() -> None:
    prof = profile_of(CpuRun().frame())
    with pytest.raises(PredictError, match="measured ratio"):
        predict(prof, Target(1, 1, device="H100"))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("not json", "not valid JSON"),
        ({"format": "x"}, "not a stallscope profile"),
        ({"format": "stallscope.predict.profile", "version": 9}, "version 9"),
    ],
)
def test_bad_profile_files(tmp_path: Path, doc: Any, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(doc.encode() if isinstance(doc, str) else orjson.dumps(doc))
    with pytest.raises(ProfileError, match=message):
        Profile.load(path)


def test_a_bad_field_of_an_edited_profile_is_named(tmp_path: Path) -> None:
    prof = profile_of(CpuRun().frame())
    doc = prof.to_dict()
    doc["buckets"][1]["bytes"] = -5
    path = tmp_path / "p.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(ProfileError, match=r"buckets\[1\]\.bytes must be >= 0"):
        profile_of(path)
    doc = prof.to_dict()
    doc["phases"][0]["phase"] = "warmup"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(ProfileError, match=r"phases\[0\]\.phase is 'warmup'"):
        profile_of(path)


def test_a_missing_run(tmp_path: Path) -> None:
    with pytest.raises(PredictError, match="no such file"):
        profile_of(tmp_path / "nothing")
