"""`import stallscope` in a fresh interpreter: what it loads, and in what order."""

from __future__ import annotations

import json
import subprocess
import sys


def _modules_after_import() -> list[str]:
    code = "import sys, json, stallscope; print(json.dumps(list(sys.modules)))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    mods: list[str] = json.loads(p.stdout)
    return mods


def test_numpy_is_imported_before_polars() -> None:
    # NumPy's OpenBLAS threads busy-wait for ~120 ms after NumPy is imported. Imported before
    # Polars, that wait overlaps Polars' one-core import. Imported after it, the wait overlapped
    # the user's first call (a two-thread Kineto scan lost a core on 2-core machines).
    mods = _modules_after_import()
    assert "numpy" in mods and "polars" in mods
    assert mods.index("numpy") < mods.index("polars")


def test_import_needs_no_torch() -> None:
    mods = _modules_after_import()
    assert "torch" not in mods
