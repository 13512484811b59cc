"""The runs the method needs for a layout, and the parts that may be skipped."""

from __future__ import annotations

import pytest

from stallscope.differential import RunConfig, plan
from stallscope.exceptions import AnalyzeError


def _names(runs: list[RunConfig]) -> list[str]:
    return [r.name for r in runs]


def test_the_full_plan_for_g_over_n() -> None:
    runs = plan(2, 2, ["1gbit", "200mbit", "1gbit"])
    assert _names(runs) == [
        "one",
        "synthetic",
        "cached",
        "cold",
        "network@1gbit",
        "network@200mbit",
    ]
    one, synth, cached, cold, net, _ = runs
    assert (one.ranks, one.nodes, one.data, one.testbed) == (1, 1, "synthetic", False)
    assert (synth.ranks, synth.nodes, synth.data) == (4, 1, "synthetic")
    assert (cached.data, cached.cache, cold.cache) == ("real", "cached", "cold")
    assert (net.ranks, net.nodes, net.ranks_per_node, net.rate, net.testbed) == (
        4,
        2,
        2,
        "1gbit",
        True,
    )


def test_single_device_and_single_node_and_skips() -> None:
    assert _names(plan(1, 1, ["1gbit"])) == ["synthetic", "cached", "cold"]
    assert _names(plan(1, 2, [])) == ["one", "synthetic", "cached", "cold"]
    assert _names(plan(2, 1, ["1gbit"], skip=["data", "interconnect"])) == [
        "synthetic",
        "network@1gbit",
    ]
    assert _names(plan(2, 1, [], skip=["network"])) == ["one", "synthetic", "cached", "cold"]


def test_bad_plans() -> None:
    with pytest.raises(AnalyzeError, match=r"cannot skip \['disk'\]"):
        plan(2, 1, ["1gbit"], skip=["disk"])
    with pytest.raises(AnalyzeError, match="needs a link rate"):
        plan(2, 1, [])
    with pytest.raises(AnalyzeError, match="must be >= 1"):
        plan(0, 1, ["1gbit"])
