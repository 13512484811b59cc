"""bench/predict_layer.py: the published per-layer table's shape and sources, and the planner's
per-layer forward and backward beside it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _module() -> Any:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("predict_layer", BENCH / "predict_layer.py")
    assert spec and spec.loader
    mod: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules["predict_layer"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_tables_name_a_published_run_and_their_source() -> None:
    doc = json.loads((BENCH / "data" / "public_layer_times.json").read_text())
    runs = {e["id"] for e in json.loads((BENCH / "data" / "public_llm_training.json").read_text())[
        "entries"
    ]}  # fmt: skip
    for table in doc["tables"]:
        assert ("run" in table) != ("config" in table)  # a published run's, or its own
        assert table.get("run", "korthikanti22-table5-22b-seq-selective") in runs
        assert table["source"]["url"].startswith("https://") and table["source"]["date"]
        for row in table["rows"]:
            assert row["elementwise"] in ("fused", "eager")
            if "run" in table:
                assert row["recompute"] in ("none", "selective", "full")
                assert 0 < row["forward"] < row["backward"]
            else:
                assert row["precision"] in ("bf16", "fp16", "fp8") and row["combined"] > 0


def test_each_row_changes_only_its_experiment() -> None:
    mod = _module()
    runs = {e["id"]: e for e in json.loads(mod.pp.DATA.read_text())["entries"]}
    table = json.loads(mod.DATA.read_text())["tables"][0]
    rows = mod.table_rows(table, runs)
    assert len(rows) == len(table["rows"])
    labels = [r["config"] for r in rows]
    assert all(lb.startswith("tp8.pp1.dp1.mb4.") for lb in labels)
    assert "rc-full" in labels[2] and ".sp." in labels[1] and ".sp." not in labels[0]
    by = {r["experiment"]: r["predicted_ms"] for r in rows}
    # full recompute repeats the forward in the backward; sequence parallelism does less
    # per-token work on each GPU
    full, none = by["Baseline with recompute"], by["Baseline no recompute"]
    assert full["backward"] > none["backward"] + 0.8 * none["forward"]
    assert by["Sequence Parallelism"]["forward"] < none["forward"]


def test_a_table_of_its_own_configures_each_row() -> None:
    mod = _module()
    table = next(t for t in json.loads(mod.DATA.read_text())["tables"] if "config" in t)
    rows = mod.table_rows(table, {})
    assert [r["experiment"] for r in rows] == [r["experiment"] for r in table["rows"]]
    by = {r["experiment"]: r for r in rows}
    fp8 = by["TE Unfused + TE Attention + FP8"]["predicted_ms"]["combined"]
    bf16 = by["TE Unfused + TE Attention"]["predicted_ms"]["combined"]
    unfused = by["TE Unfused"]["predicted_ms"]["combined"]
    assert fp8 < bf16 < unfused  # FP8 GEMMs, then the s x s scores in HBM
    assert all(set(r["error"]) == {"combined"} for r in rows)  # only the sum is published
    figures = mod.figures(rows)
    assert figures["rows"] == len(rows) and "forward" not in figures
