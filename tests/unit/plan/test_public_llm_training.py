"""bench/data/public_llm_training.json: the schema of every entry, and the published figures
checked against each other (tokens vs step time, MFU vs the source's own FLOP count and the
device table's peaks, parameter counts vs the preset's shape)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from stallscope.plan import load_stack, model, stack_names, system
from stallscope.plan._device_model import PEAK_KEY
from stallscope.plan._recompute import RECOMPUTE_MODULES
from stallscope.predict import device
from tests.unit.plan.conftest import (
    llm_foundry_flops_per_token,
    megatron_model_flops,
    param_count,
)

FILE = Path(__file__).resolve().parents[3] / "bench" / "data" / "public_llm_training.json"
DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
KEYS = {
    "id", "model", "seq_len", "precision", "tp", "pp", "cp", "ep", "dp", "virtual_stages",
    "micro_batch", "global_batch", "recompute", "sequence_parallel", "zero_stage", "gpu", "gpus",
    "gpus_per_node", "system", "interconnect", "result", "source", "notes", "stack",
}  # fmt: skip
OPTIONAL = {
    "params", "mfu_basis", "first_stage_layers", "last_stage_layers", "stage_layers_source",
    "inter_node_Gbps", "inter_node_source", "interleaved", "embedding_as_layer", "loss_as_layer",
    "dropout", "etp", "moe_dispatcher", "moe_flex_backend", "cuda_graphs", "not_counted",
    "pipeline_layout", "recompute_modules", "pairs",
}  # fmt: skip
RESULTS = {
    "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "hfu",
    "peak_fraction", "aggregate_pflops", "memory_GiB",
}  # fmt: skip


def _entries() -> list[dict[str, Any]]:
    doc = json.loads(FILE.read_text(encoding="utf-8"))
    assert doc["schema"] == 1
    entries: list[dict[str, Any]] = doc["entries"]
    return entries


ENTRIES = _entries()


def test_enough_varied_entries() -> None:
    assert len(ENTRIES) >= 30
    assert len({e["id"] for e in ENTRIES}) == len(ENTRIES)
    gpus = {device(e["gpu"]).name for e in ENTRIES}
    assert {"A100-SXM4-80GB", "A100-SXM4-40GB", "H100-SXM"} <= gpus
    sizes = [model(e["model"]).params_b or 0 for e in ENTRIES]
    assert min(sizes) <= 1.5 and max(sizes) >= 1000
    assert len({e["gpus"] for e in ENTRIES}) >= 10
    assert any(e["tp"] > 1 for e in ENTRIES) and any(e["pp"] > 1 for e in ENTRIES)
    assert any(e["cp"] > 1 for e in ENTRIES) and any(e["dp"] > 1 for e in ENTRIES)
    assert any("step_time_s" in e["result"] for e in ENTRIES)
    assert len({e["source"]["url"] for e in ENTRIES}) >= 6


@pytest.mark.parametrize("e", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_entry_schema(e: dict[str, Any]) -> None:
    assert KEYS <= set(e) <= KEYS | OPTIONAL
    m = model(e["model"])
    assert device(e["gpu"]).name == e["gpu"]
    if e["system"] is not None:
        assert system(e["system"]).gpu == e["gpu"]
    assert e["precision"] in ("fp16", "bf16", "fp8", "nvfp4")
    assert e["recompute"] in ("none", "selective", "full", None)
    if e.get("recompute_modules"):  # Megatron-Core's --recompute-modules, with selective only
        assert e["recompute"] == "selective"
        assert set(e["recompute_modules"]) <= set(RECOMPUTE_MODULES)
    assert e["sequence_parallel"] in (True, False, None)
    assert e["zero_stage"] in (0, 1, 2, 3, None)
    for k in ("tp", "pp", "cp", "ep", "dp", "gpus", "gpus_per_node", "global_batch", "seq_len"):
        assert isinstance(e[k], int) and e[k] >= 1, k
    assert e["tp"] * e["pp"] * e["cp"] * e["dp"] == e["gpus"]
    assert e["gpus"] % e["gpus_per_node"] == 0 or e["gpus"] < e["gpus_per_node"]
    # Tensor parallelism stays inside an NVLink domain: the node, or the system's wider domain
    # (a GB200 NVL72 rack of 4-GPU compute trays).
    domain = system(e["system"]).gpus_per_node if e["system"] else e["gpus_per_node"]
    assert e["tp"] <= domain
    assert m.heads % e["tp"] == 0
    if m.experts:  # the expert grid inside each stage's tp x cp x dp GPUs (Megatron-Core's rule)
        assert m.experts % e["ep"] == 0
        assert (e["tp"] * e["cp"] * e["dp"]) % (e["ep"] * e["etp"]) == 0
        assert e["moe_dispatcher"] in ("alltoall", "allgather", "flex", None)
    else:
        assert e["ep"] == 1 and "etp" not in e
    if "not_counted" in e:  # why the bench shows the run without counting it
        assert isinstance(e["not_counted"], str) and e["not_counted"]
    for pair in e.get("pairs", ()):  # a run of the same source and model, a setting apart
        other = next(x for x in ENTRIES if x["id"] == pair["with"])
        assert other["id"] != e["id"] and isinstance(pair["differs_in"], str)
        assert all(other[k] == e[k] for k in ("model", "seq_len", "gpu"))
        assert other["source"]["url"] == e["source"]["url"]
        back = {p["with"] for p in other.get("pairs", ())}
        assert e["id"] not in back, "a pair is written once"
    if e["micro_batch"] is not None:
        assert e["global_batch"] % (e["dp"] * e["micro_batch"]) == 0
    vp = e["virtual_stages"]
    assert vp is None or (isinstance(vp, int) and vp >= 1)
    uneven = [e.get("first_stage_layers"), e.get("last_stage_layers")]
    if any(n is not None for n in uneven):  # Megatron's split: the middle stages share the rest
        middle = e["pp"] - sum(n is not None for n in uneven)
        rest = m.layers - sum(n or 0 for n in uneven)
        assert middle > 0 and rest > 0 and rest % middle == 0
        s = e["stage_layers_source"]
        assert s["url"].startswith("https://") and DATE.match(s["date"]) and s["where"]
    elif e.get("pipeline_layout"):  # the source's layout: every chunk's layers, sourced
        from stallscope.plan._pipeline_layout import parse

        chunks = parse(e["pipeline_layout"])
        assert len(chunks) == e["pp"] * (vp or 1)
        assert sum(c.count("t") for c in chunks) == m.layers
        s = e["stage_layers_source"]
        assert s["url"].startswith("https://") and DATE.match(s["date"]) and s["where"]
    elif e.get("embedding_as_layer") or e.get("loss_as_layer"):
        # Megatron-Core counts the embedding / the loss as a layer each, then splits evenly
        # (account_for_embedding/loss_in_pipeline_split: Llama 3.1 405B's 126 + 2 in 8 x 8 chunks)
        slots = m.layers + bool(e.get("embedding_as_layer")) + bool(e.get("loss_as_layer"))
        assert slots % (e["pp"] * (vp or 1)) == 0
        s = e["stage_layers_source"]
        assert s["url"].startswith("https://") and DATE.match(s["date"]) and s["where"]
    else:  # interleaved chunks hold equal shares
        assert "stage_layers_source" not in e
        assert vp in (None, 1) or m.layers % (e["pp"] * vp) == 0
    if "inter_node_Gbps" in e:
        assert e["inter_node_Gbps"] > 0 and e["system"] is None
        s = e["inter_node_source"]
        assert s["url"].startswith("https://") and DATE.match(s["date"]) and s["where"]
    if "dropout" in e:  # only where the run's configuration says so, and the notes tell where
        assert e["dropout"] is True and "Dropout 0.1" in e["notes"]
    assert e["interconnect"] and isinstance(e["notes"], str)
    st = load_stack(e["stack"])  # a known preset, known fields
    assert st.name and e["stack"]["preset"] in stack_names()
    stack_sources = e["stack"].get("sources", []) + [e["stack"].get("source")] * (
        "source" in e["stack"]
    )
    for ssrc in stack_sources:  # what the run changes from its preset, and where it says so
        assert ssrc["url"].startswith("https://") and DATE.match(ssrc["date"]) and ssrc["where"]
    if set(e["stack"]) - {"preset", "source", "sources", "notes"}:
        assert stack_sources, f"{e['id']}: a stack field changed without its source"
    src = e["source"]
    assert src["url"].startswith("https://") and DATE.match(src["date"]) and src["where"]
    result = e["result"]
    assert result and set(result) <= RESULTS
    assert all(isinstance(v, int | float) and v > 0 for v in result.values())
    for k in ("mfu", "hfu", "peak_fraction"):
        assert 0 < result.get(k, 0.5) < 1
    assert set(result) - {"memory_GiB"}, "a run needs a throughput or step time"
    if "memory_GiB" in result:  # the peak a GPU's memory holds
        hbm = device(e["gpu"]).memory_gb
        assert hbm is None or result["memory_GiB"] * 2**30 < hbm * 1e9


@pytest.mark.parametrize("e", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_published_figures_agree_with_each_other(e: dict[str, Any]) -> None:
    r, n = e["result"], e["gpus"]
    tokens_per_step = e["global_batch"] * e["seq_len"]
    if "step_time_s" in r and "tokens_per_s" in r:
        assert tokens_per_step / r["step_time_s"] == pytest.approx(r["tokens_per_s"], rel=0.01)
    if "tokens_per_s" in r and "tokens_per_s_per_gpu" in r:
        assert r["tokens_per_s"] / n == pytest.approx(r["tokens_per_s_per_gpu"], rel=0.01)
    if "tflops_per_gpu" in r and "aggregate_pflops" in r:
        assert r["tflops_per_gpu"] * n / 1000 == pytest.approx(r["aggregate_pflops"], rel=0.015)
    if "tflops_per_gpu" in r and "peak_fraction" in r:
        peak = device(e["gpu"]).peak_tflops[e["precision"]]
        assert r["tflops_per_gpu"] / peak == pytest.approx(r["peak_fraction"], abs=0.006)
    peaks = device(e["gpu"]).peak_tflops
    key = PEAK_KEY.get(e["precision"], e["precision"])  # the device table's name
    if "tflops_per_gpu" in r and key in peaks:
        assert r["tflops_per_gpu"] < peaks[key]


def _mfu(e: dict[str, Any]) -> float:
    """MFU from the entry's other figures, by the source's own definition."""
    basis, r, m = e["mfu_basis"], e["result"], model(e["model"])
    peak = basis["peak_tflops"] * 1e12 * e["gpus"]
    if basis["formula"] == "korthikanti-eq7":
        return megatron_model_flops(m, e["global_batch"], e["seq_len"]) / r["step_time_s"] / peak
    if basis["formula"] == "stated":
        flops = basis["model_flops_per_sample"] * e["global_batch"]
        return float(flops / r["step_time_s"] / peak)
    if basis["formula"] == "palm":  # both figures are PaLM-style model FLOPs: only the peak
        return float(r["tflops_per_gpu"] / basis["peak_tflops"])
    assert basis["formula"] == "llm-foundry"
    per_token = llm_foundry_flops_per_token(e["params"], m, e["seq_len"])
    return per_token * r["tokens_per_s"] / peak


WITH_MFU = [e for e in ENTRIES if "mfu_basis" in e]


@pytest.mark.parametrize("e", WITH_MFU, ids=[e["id"] for e in WITH_MFU])
def test_mfu_matches_the_sources_definition_and_the_device_peak(e: dict[str, Any]) -> None:
    if e["mfu_basis"]["formula"] == "palm":  # Llama 3's Table 4 rounds TFLOP/s to 10, MFU to 1 %
        assert _mfu(e) == pytest.approx(e["result"]["mfu"], abs=0.006)
    else:
        assert _mfu(e) == pytest.approx(e["result"]["mfu"], rel=0.01)
    # The peak each source divides by is the dense one of the device table (a sparse
    # datasheet figure would be twice as large).
    peak = device(e["gpu"]).peak_tflops[e["precision"]]
    assert e["mfu_basis"]["peak_tflops"] == pytest.approx(peak, rel=0.001)


WITH_PARAMS = [e for e in ENTRIES if "params" in e]


@pytest.mark.parametrize("e", WITH_PARAMS, ids=[e["id"] for e in WITH_PARAMS])
def test_stated_parameter_count_matches_the_preset(e: dict[str, Any]) -> None:
    assert param_count(model(e["model"]), e["seq_len"]) == pytest.approx(e["params"], rel=0.001)


def _bench(name: str = "predict_public") -> Any:
    """A module of the bench folder (``_public_entries``: the entries as the planner's inputs)."""
    if str(FILE.parents[1]) not in sys.path:
        sys.path.insert(0, str(FILE.parents[1]))
    spec = importlib.util.spec_from_file_location(name, FILE.parents[1] / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PALM = [e for e in ENTRIES if e.get("mfu_basis", {}).get("formula") == "palm"]


@pytest.mark.parametrize("e", PALM, ids=[e["id"] for e in PALM])
def test_the_bench_turns_palm_model_flops_into_a_step_time(e: dict[str, Any]) -> None:
    """PaLM's Appendix B: 6N + 12 L H Q T model FLOPs per token, N the parameters."""
    bench = _bench("_public_entries")
    m, s = model(e["model"]), e["seq_len"]
    per_token = 6 * param_count(m) + 12 * m.layers * m.hidden * s
    want = e["global_batch"] * s * per_token / (e["result"]["tflops_per_gpu"] * 1e12 * e["gpus"])
    assert bench.measured_step_s(e, bench.model_of(e)) == pytest.approx(want, rel=0.001)


def test_uneven_pipeline_splits_reach_the_planner() -> None:
    """BLOOM's pipeline holds 5 of 70 layers on its first and last stages (5 + 10 x 6 + 5): the
    bench predicts it with that split. Llama 3 405B's first and last stages hold a layer fewer
    (7 + 14 x 8 + 7) in an interleaved schedule, which Megatron-Core's rule for first / last
    stage counts refuses (7 layers do not split into V > 1 equal chunks): the bench writes it as
    a pipeline layout per V, the layer fewer off the chunk holding the embedding (the loss)."""
    from stallscope.plan._pipeline_layout import parse
    from stallscope.plan._pipeline_split import chunk_layers, stage_layers

    bench = _bench("_public_entries")
    bloom = next(e for e in ENTRIES if e["id"] == "bigscience22-bloom-176b-384gpu")
    strategies, why = bench.choices(bloom, bench.model_of(bloom))
    assert strategies, why
    assert {stage_layers(bench.model_of(bloom), s) for s in strategies} == {(5, *(6,) * 10, 5)}
    llama = next(e for e in ENTRIES if e["id"] == "llama3herd24-405b-8192gpu")
    assert llama["interleaved"] and llama["first_stage_layers"] == llama["last_stage_layers"] == 7
    m = bench.model_of(llama)
    strategies, why = bench.choices(llama, m)
    assert strategies and {s.interleave for s in strategies} == {2, 4, 8}  # 8 layers split by V
    for s in strategies:
        assert s.pipeline_layout is not None and s.first_stage_layers is None
        assert stage_layers(m, s) == (7, *(8,) * 14, 7)
        each = 8 // s.interleave
        chunks = chunk_layers(m, s)
        assert chunks[0] == (each - 1, *(each,) * (s.interleave - 1))
        assert chunks[-1] == (*(each,) * (s.interleave - 1), each - 1)
        assert parse(s.pipeline_layout)[0] == "E" + "t" * (each - 1)
    assert bench.end_chunk_layout(126, 16, 3, 7, 7) == ""  # 8 layers do not split by 3
    assert bench.end_chunk_layout(126, 16, 8, 7, 7) == "E|(t|)*126L"
    row = bench.predict_entry(llama)
    assert row["counted"] is True and ".layout[" in row["config"]
    assert row["measured_step_s"] == pytest.approx(12.56, rel=0.01)


def test_the_bench_compares_each_pair_by_its_step_ratio() -> None:
    """A pair's runs are predicted whether counted or not, and compared by the ratio of their
    steps, in which an error common to both cancels."""
    bench = _bench()
    pairs = bench.pair_check(ENTRIES)
    assert len(pairs) == sum(len(e.get("pairs", ())) for e in ENTRIES) >= 1
    for p in pairs:
        (ma, mb), (pa, pb) = p["measured_s"], p["predicted_s"]
        assert p["measured_ratio"] == pytest.approx(mb / ma)
        assert p["predicted_ratio"] == pytest.approx(pb / pa)
        assert p["error"] == pytest.approx(p["predicted_ratio"] / p["measured_ratio"] - 1)
    hybridep = next(p for p in pairs if p["runs"][0].endswith("-hybridep"))
    assert hybridep["measured_s"] == pytest.approx([20.992, 24.7138])
    by_id = {e["id"]: e for e in ENTRIES}
    uncounted = next(p for p in pairs if all("not_counted" in by_id[r] for r in p["runs"]))
    assert all(t > 0 for t in uncounted["predicted_s"])
