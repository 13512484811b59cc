"""`import stallscope` in a fresh interpreter: what it loads."""

from __future__ import annotations

import json
import subprocess
import sys


def test_import_needs_no_torch() -> None:
    # The README's promise: torch is an optional extra; the package imports without it (and so
    # without CUDA or a GPU). torch is installed in the test environment, so this fails if any
    # module imported by `import stallscope` imports it.
    code = "import sys, json, stallscope; print(json.dumps(sorted(sys.modules)))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    mods: list[str] = json.loads(p.stdout)
    assert "stallscope" in mods
    assert not [m for m in mods if m == "torch" or m.startswith("torch.")]
