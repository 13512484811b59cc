"""A generated on-disk image dataset: JPEG files written with Pillow, read, decoded and
augmented per sample (random resized crop, horizontal flip, normalisation), with the fetch
(read) and prep (decode + transform) time of every sample noted for the trace (_timing)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Final

import numpy as np

from stallscope import _core
from stallscope.data import _timing
from stallscope.data._generated import generate, require
from stallscope.exceptions import DataError

INDEX: Final = "index.tsv"  # relative path <TAB> label, one line per image
#: Per-channel mean and standard deviation the samples are normalised with (of uniform [0, 1]
#: pixels: the generated images are not natural photographs).
MEAN: Final = (0.5, 0.5, 0.5)
STD: Final = (0.29, 0.29, 0.29)


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise DataError(
            "the image dataset needs Pillow: pip install 'stallscope[data]' (or pillow)"
        ) from None
    return Image


def write_images(
    root: str | os.PathLike[str],
    count: int,
    *,
    side: int = 64,
    classes: int = 10,
    seed: int = 0,
    quality: int = 90,
) -> Path:
    """Write `count` JPEG images of side x side pixels in `classes` class folders under
    `root` (``<class>/<n>.jpg``, an index and a description), unless `root` already holds
    exactly this dataset. Safe to call from every rank at once: one writes, the others wait.
    Each image is smooth colour fields plus noise, so that it decodes like a photograph of its
    size rather than a flat colour. Returns `root`."""
    if count < 1 or side < 8 or classes < 1 or not 1 <= quality <= 100:
        raise DataError(
            f"image dataset: count {count} >= 1, side {side} >= 8, classes {classes} >= 1 and "
            f"quality {quality} in 1..100 are needed"
        )
    meta = {"kind": "images", "count": count, "side": side, "classes": classes, "seed": seed}
    meta["quality"] = quality
    return generate(Path(root), meta, lambda folder: _write(folder, meta))


def _write(folder: Path, meta: dict[str, Any]) -> None:
    image = _pillow()
    rng = np.random.default_rng(meta["seed"])
    side, classes = meta["side"], meta["classes"]
    for c in range(classes):
        (folder / f"{c:03d}").mkdir()
    lines = []
    for n in range(meta["count"]):
        label = n % classes
        coarse = rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)
        base = image.fromarray(coarse).resize((side, side), image.Resampling.BICUBIC)
        noise = rng.normal(0, 24, (side, side, 3)).astype(np.int16)
        px = np.clip(np.asarray(base, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
        rel = f"{label:03d}/{n:07d}.jpg"
        image.fromarray(px).save(folder / rel, format="JPEG", quality=meta["quality"])
        lines.append(f"{rel}\t{label}\n")
    (folder / INDEX).write_text("".join(lines))


class ImageFiles:
    """The images of a `write_images` folder as a map-style dataset of (image, label): image a
    float32 array (3, crop, crop), normalised; label an int. With `augment`, a random resized
    crop (scale 0.35-1, aspect 3:4-4:3) and a horizontal flip per sample, seeded by the sample
    index and `seed` (reproducible); without, a centre crop."""

    def __init__(
        self, root: str | os.PathLike[str], crop: int = 32, augment: bool = True, seed: int = 0
    ) -> None:
        self.root = Path(root)
        meta = require(self.root, "images", "write_images")
        rows = [line.split("\t") for line in (self.root / INDEX).read_text().splitlines()]
        self.paths = [self.root / r[0] for r in rows]
        self.labels = [int(r[1]) for r in rows]
        self.side = int(meta["side"])
        if not 1 <= crop <= self.side:
            raise DataError(f"crop {crop} must be 1..{self.side} (the images' side)")
        self.crop, self.augment, self.seed = crop, augment, seed
        self._mean = np.array(MEAN, np.float32).reshape(3, 1, 1)
        self._std = np.array(STD, np.float32).reshape(3, 1, 1)

    def __len__(self) -> int:
        return len(self.paths)

    def files(self) -> list[Path]:
        """Every file a pass over the dataset reads (for stallscope.data.dataset_files)."""
        return list(self.paths)

    def _box(self, i: int) -> tuple[float, float, float, float]:
        s = self.side
        if not self.augment:
            o = (s - self.crop) / 2
            return (o, o, o + self.crop, o + self.crop)
        rng = np.random.default_rng((self.seed, i))
        area = s * s * rng.uniform(0.35, 1.0)
        aspect = float(np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3))))
        w = min(s, float(np.sqrt(area * aspect)))
        h = min(s, float(np.sqrt(area / aspect)))
        x, y = rng.uniform(0, s - w), rng.uniform(0, s - h)
        return (x, y, x + w, y + h)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        image = _pillow()
        now = _core.now_ns
        t0 = now()
        with open(self.paths[i], "rb") as f:
            data = f.read()
        t1 = now()
        img = image.open(io.BytesIO(data)).convert("RGB")
        img = img.resize((self.crop, self.crop), image.Resampling.BILINEAR, box=self._box(i))
        if self.augment and (i * 2654435761 + self.seed) & 0x100:  # flip about half the samples
            img = img.transpose(image.Transpose.FLIP_LEFT_RIGHT)
        x = np.asarray(img, dtype=np.float32).transpose(2, 0, 1) / 255.0
        x = (x - self._mean) / self._std
        t2 = now()
        _timing.fetched(t0, t1, len(data))
        _timing.prepared(t1, t2)
        return np.ascontiguousarray(x, dtype=np.float32), self.labels[i]
