"""The public functions: predict_model, plan, whatif and its plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from stallscope import plan
from stallscope.plan import STALL_COLUMNS, PlanError

from .conftest import DGX_A100, GPT3


def test_predict_model_columns_sum_to_the_step() -> None:
    p = plan.predict_model(
        GPT3, DGX_A100, nodes=64, tp=8, pp=8, micro_batch=1, global_batch=1536,
        recompute="full", interleave=2,
    )  # fmt: skip
    d = p.to_dict()
    assert d["dp"] == 8 and d["micro_batches"] == 192
    assert sum(d[c] for c in STALL_COLUMNS) == d["step_ns"]
    for st in d["stages"]:
        assert sum(st.values()) == d["step_ns"]
    assert d["compute_ns"] > 0.7 * d["step_ns"]
    assert d["interconnect_ns"] > 0  # TP all-reduces inside the node
    assert d["bubble_ns"] > 0
    assert d["tokens_per_s"] == pytest.approx(1536 * 2048 / (d["step_ns"] * 1e-9))
    assert d["fits"] and 0 < d["memory_bytes"] < 80 * 2**30


def test_predict_model_interleaving_shrinks_the_bubble() -> None:
    kw = {"nodes": 64, "tp": 8, "pp": 8, "global_batch": 512, "recompute": "full"}
    one = plan.predict_model(GPT3, DGX_A100, **kw).columns()["bubble_ns"]
    two = plan.predict_model(GPT3, DGX_A100, interleave=4, **kw).columns()["bubble_ns"]
    assert two < 0.6 * one


def test_predict_model_bad_input() -> None:
    with pytest.raises(PlanError, match="tp=7 does not divide heads"):
        plan.predict_model(GPT3, DGX_A100, nodes=2, tp=7, global_batch=16)
    with pytest.raises(PlanError, match="--gpus-per-node must be 1 to 8"):
        plan.predict_model(GPT3, DGX_A100, nodes=2, gpus_per_node=16, global_batch=16)


def test_whatif_table_and_plot(tmp_path: Path) -> None:
    small = {"name": "s", "layers": 8, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000}
    t = plan.whatif(
        small, DGX_A100, 16, knobs={"nic": [0.25, 1, 4], "compute": [2]}, global_batch=64
    )
    assert t.columns[:2] == ["knob", "factor"] and t.height == 5  # each knob through 1
    base = t.filter(t["factor"] == 1.0)["step_s"][0]
    nic = dict(
        zip(
            t.filter(t["knob"] == "nic")["factor"],
            t.filter(t["knob"] == "nic")["step_s"],
            strict=True,
        )
    )
    assert nic[0.25] >= base >= nic[4.0]
    faster = t.filter((t["knob"] == "compute") & (t["factor"] == 2.0))["step_s"][0]
    assert faster < base
    pytest.importorskip("matplotlib", reason="the what-if plot needs matplotlib")
    out = plan.plot_whatif(t, tmp_path / "w.svg")
    assert out.read_text().lstrip().startswith("<?xml")
    with pytest.raises(PlanError, match=r"use a \.svg"):
        plan.plot_whatif(t, tmp_path / "w.txt")


def test_unknown_knob() -> None:
    from stallscope.plan._whatif import parse_knob

    with pytest.raises(PlanError, match="unknown what-if knob 'nics': nearest nic"):
        parse_knob("nics=1,2")
    with pytest.raises(PlanError, match="factors must be numbers"):
        parse_knob("nic=a")
    assert parse_knob("hbm-bandwidth=0.5,2") == ("hbm_bandwidth", [0.5, 2.0])


@pytest.mark.parametrize(
    ("call", "word"),
    [
        (lambda: plan.plan("gpt3-6.7b", DGX_A100, "64"), "gpus"),  # type: ignore[arg-type]
        (lambda: plan.plan("gpt3-6.7b", DGX_A100, 64, top=0), "top"),
        (lambda: plan.whatif("gpt3-6.7b", DGX_A100, 64, global_batch=2.5), "global_batch"),  # type: ignore[arg-type]
        (
            lambda: plan.predict_model("gpt3-6.7b", DGX_A100, nodes=1, tp=True, global_batch=8),
            "tp",
        ),
    ],
)
def test_counts_that_are_not_whole_numbers_name_themselves(call: object, word: str) -> None:
    """What the CLI's options check, the Python API checks too: a count given as text, a
    fraction, a bool or below 1 is a PlanError naming the argument, not a TypeError from
    inside the search."""
    assert callable(call)
    with pytest.raises(PlanError, match=rf"^{word} must be a whole number >= 1"):
        call()
