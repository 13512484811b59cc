"""The generated JPEG dataset: written once (every rank may ask at once), read, decoded and
augmented reproducibly, with each sample's fetch and prep times noted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stallscope.data as sd
from stallscope.data import _timing
from stallscope.exceptions import DataError

pytest.importorskip("PIL", reason="the image dataset needs Pillow (the data extra)")


def test_written_once_then_reused(tmp_path: Path) -> None:
    root = sd.write_images(tmp_path / "img", 12, side=24, classes=3)
    jpegs = sorted(root.rglob("*.jpg"))
    assert len(jpegs) == 12 and {p.parent.name for p in jpegs} == {"000", "001", "002"}
    assert jpegs[0].read_bytes()[:2] == b"\xff\xd8"  # JPEG start-of-image
    meta = json.loads((root / "dataset.json").read_text())
    assert meta == {
        "kind": "images",
        "count": 12,
        "side": 24,
        "classes": 3,
        "seed": 0,
        "quality": 90,
    }
    stamp = jpegs[0].stat().st_mtime_ns
    sd.write_images(root, 12, side=24, classes=3)  # the same dataset: left as it is
    assert jpegs[0].stat().st_mtime_ns == stamp
    sd.write_images(root, 6, side=24, classes=3)  # another one: replaced
    assert len(list(root.rglob("*.jpg"))) == 6


def test_concurrent_writers_make_one_dataset(tmp_path: Path) -> None:
    code = (
        "import sys, stallscope.data as sd; "
        "sd.write_images(sys.argv[1], 40, side=16); print(len(sd.ImageFiles(sys.argv[1], 8)))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path / "d")], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert outs == ["40", "40", "40"] and all(p.returncode == 0 for p in procs)
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_samples_are_normalised_crops_and_reproducible(tmp_path: Path) -> None:
    ds = sd.ImageFiles(sd.write_images(tmp_path / "img", 8, side=32, classes=4), crop=16)
    assert len(ds) == 8 and ds.files() == ds.paths
    _timing._pending.clear()
    x, y = ds[5]
    assert x.shape == (3, 16, 16) and x.dtype == np.float32 and y == 1
    assert -3.0 < float(x.mean()) < 3.0 and float(x.std()) > 0.1
    (fetch, prep) = list(_timing._pending)
    assert fetch[0] and fetch[3] == ds.paths[5].stat().st_size and fetch[2] <= prep[1]
    assert not prep[0] and prep[2] >= prep[1]
    again, _ = ds[5]
    assert np.array_equal(x, again)
    other = sd.ImageFiles(ds.root, crop=16, seed=1)[5][0]
    assert not np.array_equal(x, other)
    centre = sd.ImageFiles(ds.root, crop=16, augment=False)
    assert np.array_equal(centre[5][0], centre[5][0])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"count": 0}, "count 0 >= 1"),
        ({"count": 4, "side": 4}, "side 4 >= 8"),
        ({"count": 4, "quality": 0}, "quality 0 in 1..100"),
    ],
)
def test_bad_parameters(tmp_path: Path, kwargs: dict[str, int], match: str) -> None:
    count = kwargs.pop("count")
    with pytest.raises(DataError, match=match):
        sd.write_images(tmp_path / "x", count, **kwargs)


def test_refuses_a_folder_of_other_files_and_unknown_datasets(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(DataError, match="is not a generated images dataset: choose an empty"):
        sd.write_images(tmp_path / "mine", 4, side=16)
    assert (tmp_path / "mine" / "notes.txt").exists()
    with pytest.raises(DataError, match=r"not a complete generated images dataset .*write_images"):
        sd.ImageFiles(tmp_path / "mine")
    root = sd.write_images(tmp_path / "ok", 4, side=16)
    with pytest.raises(DataError, match=r"crop 17 must be 1\.\.16"):
        sd.ImageFiles(root, crop=17)


def test_without_pillow_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(DataError, match=r"needs Pillow: pip install 'stallscope\[data\]'"):
        sd.write_images(tmp_path / "x", 2, side=16)
