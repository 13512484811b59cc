"""Fixtures of the CUPTI backend tests: the fake libcupti (tests/fake_cupti/),
compiled once per session with the system C++ compiler and loaded as this process's libcupti."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
FAKE_DIR = ROOT / "tests" / "fake_cupti"
FAKE_SRC = [FAKE_DIR / "fake_cupti.cc", FAKE_DIR / "fake_cupti_control.cc"]


def build_fake(out_dir: Path) -> Path:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++/c++) to build the fake libcupti")
    out = out_dir / "libfake_cupti.so"
    subprocess.run(
        [
            cxx,
            "-std=c++20",
            "-O1",
            "-shared",
            "-fPIC",
            "-fvisibility=hidden",
            "-o",
            str(out),
            *(str(p) for p in FAKE_SRC),
            "-lpthread",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


class Fake:
    """ctypes handle on the fake's control API."""

    def __init__(self, path: Path) -> None:
        self.path = path
        lib = ctypes.CDLL(str(path))
        u32, u64, i32, cp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_char_p
        sig: dict[str, tuple[Any, list[Any]]] = {
            "fake_cupti_reset": (None, []),
            "fake_cupti_set_fail": (None, [cp, ctypes.c_int]),
            "fake_cupti_set_other_subscriber": (None, [ctypes.c_int]),
            "fake_cupti_add_dropped": (None, [u64]),
            "fake_cupti_launch_kernel": (u32, [cp, u32, u32, u64, u64, u64, ctypes.c_int]),
            "fake_cupti_untimed_kernel": (u32, [cp, u32]),
            "fake_cupti_memcpy": (u32, [u32, u32, u32, u64, u32, u32, u64]),
            "fake_cupti_memcpy_p2p": (u32, [u32, u32, u64, u32, u64]),
            "fake_cupti_memset": (u32, [u64, u32, u32, u64]),
            "fake_cupti_sync": (u32, [i32, u32, u32]),
            "fake_cupti_nvtx_range": (u32, [cp, cp, u64]),
            "fake_cupti_nvtx_mark": (u32, [cp]),
            "fake_cupti_nvtx_orphan_end": (None, []),
            "fake_cupti_overhead": (None, [i32, u64]),
            "fake_cupti_unknown_record": (None, []),
            "fake_cupti_incomplete_record": (None, []),
            "fake_cupti_complete_buffers": (None, []),
            "fake_cupti_hijack": (None, []),
            "fake_cupti_kind_enabled": (ctypes.c_int, [i32]),
            "fake_cupti_runtime_enabled": (ctypes.c_int, [u32]),
            "fake_cupti_runtime_enabled_count": (ctypes.c_int, []),
            "fake_cupti_driver_enabled": (ctypes.c_int, [u32]),
            "fake_cupti_ext_depth": (ctypes.c_int, [i32, ctypes.POINTER(u64)]),
            "fake_cupti_counter": (u64, [ctypes.c_int]),
        }
        for name, (res, args) in sig.items():
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = args
        self.lib = lib

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, "fake_cupti_" + name)

    def kernel(
        self,
        mangled: str,
        *,
        device: int = 0,
        stream: int = 7,
        api_ns: int = 3_000,
        delay_ns: int = 5_000,
        duration_ns: int = 20_000,
        driver: bool = False,
    ) -> int:
        return int(
            self.lib.fake_cupti_launch_kernel(
                mangled.encode(), device, stream, api_ns, delay_ns, duration_ns, int(driver)
            )
        )

    def ext_depth(self, kind: int) -> tuple[int, int]:
        top = ctypes.c_uint64(0)
        n = self.lib.fake_cupti_ext_depth(kind, ctypes.byref(top))
        return int(n), int(top.value)

    # counters (see fake_cupti_counter)
    def finalized(self) -> int:
        return int(self.lib.fake_cupti_counter(0))

    def counter(self, which: int) -> int:
        return int(self.lib.fake_cupti_counter(which))


@pytest.fixture(scope="session")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake(tmp_path_factory.mktemp("fake_cupti"))


@pytest.fixture
def fake(fake_lib: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    """The fake loaded as this process's libcupti, reset, with driver and device reported
    present (there are none on CI)."""
    from stallscope.capture import _cupti

    monkeypatch.setenv(_cupti.ENV_LIBRARY, str(fake_lib))
    r = _cupti.load()
    if not r.ok or r.path != str(fake_lib):
        pytest.fail(f"the fake libcupti did not load as this process's libcupti: {r}")
    monkeypatch.setattr(_cupti, "_driver_status", lambda: (True, "fake driver"))
    monkeypatch.setattr(_cupti, "_device_status", lambda: (True, "fake device"))
    for var in ("CUDA_INJECTION64_PATH", "LD_PRELOAD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "")  # the backend sets it; undone at teardown
    f = Fake(fake_lib)
    f.reset()
    _cupti._last_start_error.clear()
    saved = _cupti._options
    yield f
    _cupti._options = saved
    f.reset()
