"""Which MAMF row times which GPU (predict/data/matmul_rates.json): a row applies to the
boards of its family name and no other (an L40S is not an L4, a PCIe card not an SXM module);
GPUs without bf16 (V100, T4) have fp16 rows of their own; a row without a published shape gives
its rate over the peak."""

from __future__ import annotations

import pytest

import stallscope.plan as plan
from stallscope.plan._cluster import build_device, typical_over_best
from stallscope.plan._gemm import efficiency_defaults, fraction_at, mamf_entry
from stallscope.predict._matmul_rates import matmul_rates


def _row(family: str, precision: str) -> dict[str, object]:
    row: dict[str, object] = matmul_rates()["devices"][family][precision]
    return row


def test_a_row_applies_to_its_family_up_to_a_separator() -> None:
    found = mamf_entry("L4", "bf16")
    assert found is not None and found[0] == "L4"
    found = mamf_entry("L40S", "bf16")
    assert found is not None and found[0] == "L40S"  # not the L4's row
    assert mamf_entry("L40", "bf16") is None  # a name that only begins like L4
    found = mamf_entry("A100-SXM4-80GB", "bf16")
    assert found is not None and found[0] == "A100"
    found = mamf_entry("H100-PCIe", "bf16")
    assert found is not None and found[0] == "H100-PCIE"
    found = mamf_entry("H100-SXM", "bf16")
    assert found is not None and found[0] == "H100-SXM"  # the SXM module never takes the PCIe row
    # the 96 GB H100 of other clocks and power, unpublished, takes neither
    assert mamf_entry("H100-96GB-HBM2e", "bf16") is None


def test_an_alias_finds_its_gpus_row() -> None:
    # torch.cuda.get_device_name's names are aliases of the device table's
    for alias, name in (("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"), ("NVIDIA L4", "L4")):
        assert build_device(alias, {}, "t").fraction("bf16") == pytest.approx(
            build_device(name, {}, "t").fraction("bf16")
        )
    assert build_device("Tesla T4", {}, "t").fraction("fp16") == pytest.approx(
        build_device("T4", {}, "t").fraction("fp16")
    )


def test_fp16_takes_its_own_row_where_the_gpu_has_no_bf16() -> None:
    found = mamf_entry("V100-SXM2-32GB", "fp16")
    assert found is not None and found[0] == "V100"
    assert mamf_entry("V100-SXM2-32GB", "bf16") is None
    found = mamf_entry("A100-SXM4-80GB", "fp16")  # fp16 runs at bf16's
    assert found is not None and found[1] is _row("A100", "bf16")


def test_the_rows_set_the_gemm_fraction_of_gpus_without_a_table() -> None:
    ratio = dict(typical_over_best())["bf16"]
    fixed = float(efficiency_defaults()["gemm_fixed_us"]["value"]) * 1e-6
    # a published shape: the GEMM model's fraction at that shape
    l4 = build_device("L4", {}, "test")
    assert l4.fraction("bf16") == pytest.approx(
        fraction_at(70.89, (2048, 2048, 2048), 121e12, fixed) * ratio
    )
    v100 = build_device("V100-SXM2-32GB", {}, "test")
    assert v100.fraction("fp16") == pytest.approx(
        fraction_at(97.36, (8192, 8192, 8192), 125e12, fixed) * ratio
    )
    # no published shape: the rate over the peak
    t4 = build_device("T4", {}, "test")
    assert t4.fraction("fp16") == pytest.approx(41.93 / 65 * ratio)
    assert "shape unpublished" in t4.basis["matmul"]
    # the 72 W and 70 W boards run far below the default taken from an H100
    default = float(matmul_rates()["default_fraction"]) * ratio
    assert t4.fraction("fp16") < 0.85 * default and l4.fraction("bf16") < 0.8 * default


def test_every_row_names_its_source() -> None:
    table = matmul_rates()
    for family, rows in table["devices"].items():
        for precision, row in rows.items():
            if row["peak"] is not None:  # the A10G has no published peak
                assert row["tflops"] < row["peak"], (family, precision)
            if row.get("method") == "crowd":
                assert row["source"].startswith("https://github.com/"), family
                assert row["date"] and row["where"], family


def test_a_t4_step_is_predicted_at_its_measured_rate() -> None:
    model = plan.Model(layers=4, hidden=2048, heads=16, seq_len=1024, vocab=32000, name="small")
    system = {"gpu": "T4", "gpus_per_node": 1, "intra_node_GBps": 16, "inter_node_Gbps": 25}
    slow = plan.predict_model(model, system, nodes=1, global_batch=8, precision="fp16")
    fast = plan.predict_model(
        model, {**system, "matmul_fraction": 0.8}, nodes=1, global_batch=8, precision="fp16"
    )
    assert slow.step_ns > 1.2 * fast.step_ns  # the GEMMs dominate a T4's step
    with pytest.raises(plan.PlanError, match="no bf16 peak"):
        plan.predict_model(model, system, nodes=1, global_batch=8, precision="bf16")
