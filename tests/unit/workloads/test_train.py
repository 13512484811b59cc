"""The training job on real data: each model family trains on its pipeline, traced on its own,
with the data wait split into fetch and prep; the model builders' sizes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import stallscope

pytestmark = pytest.mark.torch


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        ("lm", ["--depth", "1", "--seq-len", "16"]),
        (
            "cnn",
            ["--blocks", "2", "--width", "8", "--images", "64", "--side", "24", "--crop", "16"],
        ),
    ],
)
def test_a_model_trains_on_its_pipeline_traced_on_its_own(
    tmp_path: Path, model: str, extra: list[str]
) -> None:
    if model == "cnn":
        pytest.importorskip("PIL", reason="the image pipeline needs Pillow (the data extra)")
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STALLSCOPE_")}
    p = subprocess.run(
        [sys.executable, "-m", "stallscope.workloads._train", "--model", model, "--steps", "4",
         "--batch-size", "4", "--workers", "0", "--data", str(tmp_path / "data"), "--out",
         str(run), *extra],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    table = stallscope.stall_table(stallscope.load(run))
    assert table.height == 5  # 4 steps and the tail after the last one
    steps = table.head(4)
    assert (steps["compute_ns"] > 0).all()
    assert int(steps["data_fetch_ns"].sum()) > 0 and int(steps["data_prep_ns"].sum()) > 0


def test_model_sizes() -> None:
    from stallscope.workloads._models import cnn, gradient_bytes, layer_count, lm, mlp

    m = mlp(2, 16, inputs=12, classes=3)  # 12*16+16, 16*16+16, 16*3+3 parameters
    assert layer_count(m) == 3
    assert gradient_bytes(m) == 4 * (12 * 16 + 16 + 16 * 16 + 16 + 16 * 3 + 3)
    assert layer_count(cnn(3, 8)) > layer_count(cnn(1, 8))
    assert layer_count(cnn(3, 8, batch_norm=False)) < layer_count(cnn(3, 8))
    assert gradient_bytes(lm(vocab=10, dim=4, depth=0)) == 4 * (10 * 4 + 4 + 4 + 4 * 10 + 10)
    with pytest.raises(ValueError, match="depth >= 1"):
        mlp(0, 4)
    with pytest.raises(ValueError, match="blocks >= 1"):
        cnn(0, 4)
