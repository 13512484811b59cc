"""Model and system files: keys, aliases, presets and the errors of bad ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stallscope.plan import PlanError, load_model, load_system

from .conftest import DGX_A100, GPT3


def test_model_file_and_aliases(tmp_path: Path) -> None:
    f = tmp_path / "m.json"
    f.write_text(json.dumps(GPT3))
    m = load_model(f)
    assert (m.layers, m.hidden, m.kv_heads, m.ffn_hidden) == (96, 12288, 96, 49152)
    hf = {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "max_position_embeddings": 8192,
        "vocab_size": 128256,
        "hidden_act": "silu",
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
    }
    llama = load_model(hf)
    assert llama.gated_ffn and llama.kv_heads == 8 and llama.seq_len == 8192
    assert llama.params() == pytest.approx(8.0e9, rel=0.03)  # Llama 3 8B


def test_gemma_configs_are_gated_whatever_their_activation() -> None:
    # Gemma 2 9B's config.json: GeGLU (gate, up and down projections) under a GELU activation
    gemma2 = {
        "model_type": "gemma2",
        "hidden_size": 3584,
        "intermediate_size": 14336,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "num_hidden_layers": 42,
        "vocab_size": 256000,
        "max_position_embeddings": 8192,
        "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True,
    }
    m = load_model(gemma2)
    assert m.gated_ffn and m.head_dim == 256
    assert m.params() == pytest.approx(9.24e9, rel=0.01)  # Gemma 2 9B: 9.24 B parameters
    # a GELU model of another type keeps its plain FFN (GPT-NeoX)
    neox = gemma2 | {"model_type": "gpt_neox", "hidden_act": "gelu", "head_dim": 224}
    assert not load_model({k: v for k, v in neox.items() if k != "hidden_activation"}).gated_ffn


def test_bad_model_files(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="lacks heads, seq_len"):
        load_model({"layers": 2, "hidden": 8, "vocab": 8})
    with pytest.raises(PlanError, match="'hiden': did you mean hidden"):
        load_model(GPT3 | {"hiden": 3})
    with pytest.raises(PlanError, match="not a multiple of heads"):
        load_model(GPT3 | {"heads": 100})
    with pytest.raises(PlanError, match="layers must be a positive integer"):
        load_model(GPT3 | {"layers": 0})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(PlanError, match="not readable JSON"):
        load_model(bad)
    with pytest.raises(PlanError, match="does not exist"):
        load_model(tmp_path / "missing.json")


def test_system_keys_and_errors() -> None:
    s = load_system(DGX_A100)
    assert s.device.peak("bf16") == 312e12
    assert s.inter_bytes_s_per_gpu == pytest.approx(1600 / 8 * 1e9 * 0.79 / 8)
    with pytest.raises(PlanError, match="lacks inter_node_Gbps"):
        load_system({k: v for k, v in DGX_A100.items() if k != "inter_node_Gbps"})
    with pytest.raises(PlanError, match=r"'gpus_per_nod' \(nearest: gpus_per_node"):
        load_system(DGX_A100 | {"gpus_per_nod": 8})
    with pytest.raises(PlanError, match="gpus_per_node must be a positive number"):
        load_system(DGX_A100 | {"gpus_per_node": 0})


def test_a_systems_peaks_add_to_the_device_tables_per_precision() -> None:
    # B300's table has no FP4 peak: giving it keeps bf16 and fp8; a number sets bf16 alone
    doc = {"gpu": "B300", "gpus_per_node": 8, "intra_node_GBps": 900, "inter_node_Gbps": 3200}
    table = load_system(doc).device.peak_tflops
    assert "fp4" not in table
    given = load_system(doc | {"peak_tflops": {"fp4": 13500}}).device.peak_tflops
    assert given == table | {"fp4": 13500}
    assert load_system(doc | {"peak_tflops": {"fp8": 4000}}).device.peak("fp8") == 4000e12
    assert set(load_system(doc | {"peak_tflops": 2000}).device.peak_tflops) == {"bf16", "fp16"}


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"peak_tflops": {"fp4": "lots"}}, r"peak_tflops\['fp4'\] must be a positive number"),
        ({"peak_tflops": {"bf16": 0}}, r"peak_tflops\['bf16'\] must be a positive number"),
        ({"peak_tflops": {"int4": 100}}, r"unknown precision 'int4': use .*fp4"),
        ({"peak_tflops": []}, r"peak_tflops must be a positive number, got \[\]"),
        ({"peak_tflops": -1}, r"peak_tflops must be a positive number, got -1"),
        ({"hbm_GBps": "fast"}, r"hbm_GBps must be a positive number, got 'fast'"),
        ({"hbm_GB": 0}, r"hbm_GB must be a positive number"),
        ({"inter_node_fraction": True}, r"inter_node_fraction must be a positive number"),
        ({"sms": -4}, r"sms must be a number >= 0"),
    ],
)
def test_a_systems_figures_out_of_range_name_the_key(extra: dict[str, object], match: str) -> None:
    with pytest.raises(PlanError, match=match):
        load_system(DGX_A100 | extra)
    assert load_system(DGX_A100 | {"sms": 0, "inter_node_latency_us": 0}).device.sms == 0


def test_unknown_gpu_names_the_nearest_and_the_figures_to_give() -> None:
    doc = {"gpu": "A100-SXM-80", "gpus_per_node": 8, "intra_node_GBps": 300, "inter_node_Gbps": 1}
    with pytest.raises(PlanError, match=r"A100-SXM4-80GB.*peak_tflops"):
        load_system(doc)


def test_presets_and_the_nearest_names() -> None:
    m = load_model("GPT-3 175B")
    assert (m.layers, m.hidden, m.heads, m.tied_embeddings) == (96, 12288, 96, True)
    llama = load_model("llama3-70b")
    assert llama.gated_ffn and llama.kv_heads == 8 and not llama.tied_embeddings
    c = load_system("DGX A100")
    assert c.gpus_per_node == 8 and c.device.peak("bf16") == 312e12
    assert c.inter_node_Gbps == pytest.approx(1600)
    with pytest.raises(PlanError, match=r"gpt3-175b.*or give a model JSON file"):
        load_model("gpt3-175")
    with pytest.raises(PlanError, match="or give a system JSON file"):
        load_system("dgx-z100")


def _tflops(n: int, rate: float, fixed: float) -> float:
    """TFLOP/s of an n^3 GEMM at ``rate`` plus ``fixed`` s: the device model's GEMM."""
    return 2 * n**3 / (2 * n**3 / rate + fixed) / 1e12


def test_efficiency_table_calibrates_the_device() -> None:
    rows = [
        {"op": "gemm", "m": n, "n": n, "k": n, "dtype": "bf16"}
        | {"tflops": _tflops(n, 250e12, 4e-6)}
        for n in (512, 1024, 2048, 4096, 8192)
    ]
    rows.append(
        {
            "op": "attention",
            "batch": 4,
            "heads": 16,
            "seq": 2048,
            "head_dim": 128,
            "causal": True,
            "dtype": "bf16",
            "fwd_tflops": 200.0,
            "bwd_tflops": 150.0,
        }
    )
    s = load_system(DGX_A100 | {"sms": 0, "efficiency_table": {"rows": rows, "memcpy_GBps": 1800}})
    d = s.device
    assert d.matmul_fraction == pytest.approx(250 / 312, rel=1e-6)
    assert d.gemm_fixed_s == pytest.approx(4e-6, rel=1e-6)
    assert d.attn_fwd_fraction == pytest.approx(200 / 312)
    assert d.hbm_fraction == pytest.approx(1800 / 2039)
    assert "least squares over 5 measured GEMMs" in d.basis["matmul"]
    with pytest.raises(PlanError, match="no usable rows"):
        load_system(DGX_A100 | {"efficiency_table": {"rows": [{"op": "conv"}]}})


def test_the_measured_tables_layout_calibrates_per_precision() -> None:
    def t(n: int, rate: float) -> float:  # TFLOP/s of an n^3 GEMM at `rate` plus 3 us
        return _tflops(n, rate, 3e-6)

    table = {
        "format": "stallscope.device_efficiency",
        "gemm": [
            *(
                {"m": n, "n": n, "k": n, "dtype": "bf16", "tflops": t(n, 260e12)}
                for n in (1024, 4096, 8192)
            ),
            *(
                {"m": n, "n": n, "k": n, "dtype": "fp8", "tflops": t(n, 400e12)}
                for n in (1024, 4096, 8192)
            ),
            {"m": 4096, "n": 4096, "k": 4096, "dtype": "tf32", "tflops": 100.0},
        ],
        "attention": [{"fwd_tflops": 150.0, "bwd_tflops": 100.0}],
        "memory": [{"op": "copy", "bytes": 1 << 30, "GBps": 1700.0}, {"op": "add", "GBps": 1500.0}],
    }
    fig = DGX_A100 | {"sms": 0, "peak_tflops": {"bf16": 312, "fp8": 624}, "efficiency_table": table}
    d = load_system(fig).device
    assert d.fraction("bf16") == pytest.approx(260 / 312, rel=1e-6)
    assert d.fraction("fp16") == d.fraction("bf16")
    assert d.fraction("fp8") == pytest.approx(400 / 624, rel=1e-6)
    assert d.gemm_fixed_s == pytest.approx(3e-6, rel=1e-6)
    assert d.hbm_fraction == pytest.approx(1700 / 2039)
    assert d.attn_bwd_fraction == pytest.approx(100 / 312)


def test_a_table_applies_to_its_die_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stallscope.plan import _cluster

    folder = tmp_path / "predict" / "data" / "efficiency"
    folder.mkdir(parents=True)
    (folder / "H200.json").write_text("{}")
    monkeypatch.setattr(_cluster, "_TABLES", folder)
    assert _cluster._shipped_table("H100-SXM") == folder / "H200.json"
    assert _cluster._shipped_table("H200-SXM") == folder / "H200.json"
    assert _cluster._shipped_table("A100-SXM4-80GB") is None


def test_measured_layers_add_what_the_kernel_sum_misses() -> None:
    from stallscope.plan import Strategy
    from stallscope.plan._costs import costs
    from stallscope.plan._layer_fit import modelled_layer_s

    table = {"gemm": [{"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "tflops": 250.0}]}
    plain = load_system(DGX_A100 | {"efficiency_table": table})
    base = plain.device  # what the kernel sums give once the table's GEMM rate is in
    shapes = [(1024, 16, 2048, 4), (4096, 32, 2048, 1), (8192, 64, 2048, 1)]
    rows = []
    for (h, heads, seq, mb), ratio in zip(shapes, (1.1, 1.25, 1.4), strict=True):
        r = {"op": "layer", "hidden": h, "heads": heads, "seq": seq, "micro_batch": mb}
        t = modelled_layer_s(base, r) * ratio
        rows.append(r | {"dtype": "bf16", "fwd_seconds": t / 3, "bwd_seconds": 2 * t / 3})
    s = load_system(DGX_A100 | {"efficiency_table": table | {"layers": rows}})
    assert s.device.layer_factor == pytest.approx(1.25)  # the median ratio
    assert plain.device.layer_factor == 1.0
    m = load_model({"layers": 4, "hidden": 4096, "heads": 32, "seq_len": 2048, "vocab": 32000})
    st = Strategy(global_batch=1)
    with_gap, without = costs(m, st, s), costs(m, st, plain)
    assert with_gap.f_comp == pytest.approx(1.25 * without.f_comp)
    assert with_gap.layer is not None
    assert dict(with_gap.layer.f_parts)["measured_gap"] == pytest.approx(0.25 * without.f_comp)
    assert "median measured / modelled layer time over 3 layers" in s.device.basis["layer"]
