"""The step breakdown: compute by part next to exposed communication and the bubble."""

from __future__ import annotations

import pytest

from stallscope import plan
from stallscope.plan._layer import LAYER_PARTS

from .conftest import DGX_A100, GPT3


def test_parts_sum_to_the_step_and_match_the_compute_column() -> None:
    p = plan.predict_model(
        GPT3, DGX_A100, nodes=64, tp=8, pp=8, global_batch=1536, recompute="full", interleave=2
    )
    parts = p.parts()
    step = p.step_ns * 1e-9
    assert parts["seconds"].sum() == pytest.approx(step, rel=1e-9)
    assert parts["share"].sum() == pytest.approx(1.0, rel=1e-9)
    got = dict(zip(parts["part"], parts["seconds"], strict=True))
    assert set(LAYER_PARTS) <= set(got)
    counted = (*LAYER_PARTS, "contention", "embedding_and_logits", "fp8_weight_cast", "optimizer")
    compute = sum(got[k] for k in counted)
    # the counted parts are the simulated compute: nothing left over, nothing missing
    assert got["compute_other"] == pytest.approx(0.0, abs=1e-3 * step)
    assert compute == pytest.approx(p.columns()["compute_ns"] * 1e-9, rel=2e-3)
    # full recompute repeats the forward: a third of the layer compute, about
    layer = sum(got[k] for k in LAYER_PARTS)
    assert 0.2 < got["recompute"] / layer < 0.4
    # the FFN GEMMs (8 h^2 each per token) outweigh the QKV (6 h^2) and projection (2 h^2)
    assert got["gemm_fc1"] > got["gemm_qkv"] > got["gemm_proj"]
    assert got["interconnect"] > 0 and got["bubble"] > 0


def test_parts_without_recompute_have_none() -> None:
    p = plan.predict_model(GPT3, DGX_A100, nodes=64, tp=8, pp=8, global_batch=512)
    got = dict(zip(p.parts()["part"], p.parts()["seconds"], strict=True))
    assert got["recompute"] == 0.0


def test_one_layer_sums_to_its_forward_and_backward() -> None:
    from stallscope.plan._costs import costs

    for kw in ({"recompute": "full"}, {"sequence_parallel": True, "recompute": "selective"}):
        p = plan.predict_model(GPT3, DGX_A100, nodes=8, tp=8, pp=8, global_batch=64, **kw)
        c = costs(p.model, p.strategy, p.system)
        lay = p.layer()
        assert lay["forward_s"].sum() == pytest.approx(c.f_comp + c.f_tp, rel=1e-12)
        assert lay["backward_s"].sum() == pytest.approx(c.b_comp + c.b_tp, rel=1e-12)
        got = {r["part"]: r for r in lay.iter_rows(named=True)}
        assert set(LAYER_PARTS) | {"contention", "communication"} == set(got)
        assert got["communication"]["forward_s"] == pytest.approx(c.f_tp)
        assert got["recompute"]["forward_s"] == 0.0
        if kw["recompute"] == "full":  # the forward again, in the backward
            forward_compute = sum(got[k]["forward_s"] for k in LAYER_PARTS)
            assert got["recompute"]["backward_s"] == pytest.approx(forward_compute, rel=0.05)
        # the JSON carries it in ns
        doc = p.to_dict()["layer_ns"]
        assert doc["forward"] == round(lay["forward_s"].sum() * 1e9)
        assert set(doc["parts"]) == set(got)
