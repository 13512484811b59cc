"""stallscope's own CUPTI declarations (csrc/cupti/cupti_abi.h) against NVIDIA's headers, where a
CUDA toolkit is installed: every record field stallscope reads sits at the same offset, and every
enum value it uses is the same. (The build never includes NVIDIA's headers; this test only
compiles a checker.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# (our struct, NVIDIA struct, [(our field, their field), ...]); sizes are compared too.
RECORDS = [
    ("ActivityKernel", "CUpti_ActivityKernel10", [
        ("start", "start"), ("end", "end"), ("device_id", "deviceId"),
        ("context_id", "contextId"), ("stream_id", "streamId"),
        ("correlation_id", "correlationId"), ("name", "name"), ("queued", "queued"),
        ("graph_id", "graphId"), ("is_device_launched", "isDeviceLaunched"),
    ]),
    ("ActivityMemcpy", "CUpti_ActivityMemcpy6", [
        ("copy_kind", "copyKind"), ("src_kind", "srcKind"), ("dst_kind", "dstKind"),
        ("bytes", "bytes"), ("start", "start"), ("end", "end"), ("device_id", "deviceId"),
        ("context_id", "contextId"), ("stream_id", "streamId"),
        ("correlation_id", "correlationId"), ("copy_count", "copyCount"),
    ]),
    ("ActivityMemcpyPtoP", "CUpti_ActivityMemcpyPtoP4", [
        ("bytes", "bytes"), ("start", "start"), ("device_id", "deviceId"),
        ("stream_id", "streamId"), ("src_device_id", "srcDeviceId"),
        ("dst_device_id", "dstDeviceId"), ("correlation_id", "correlationId"),
    ]),
    ("ActivityMemset", "CUpti_ActivityMemset4", [
        ("bytes", "bytes"), ("start", "start"), ("device_id", "deviceId"),
        ("context_id", "contextId"), ("stream_id", "streamId"),
        ("correlation_id", "correlationId"), ("memory_kind", "memoryKind"),
    ]),
    ("ActivitySynchronization", "CUpti_ActivitySynchronization2", [
        ("type", "type"), ("start", "start"), ("end", "end"), ("correlation_id", "correlationId"),
        ("context_id", "contextId"), ("stream_id", "streamId"),
    ]),
    ("ActivityExternalCorrelation", "CUpti_ActivityExternalCorrelation", [
        ("external_kind", "externalKind"), ("external_id", "externalId"),
        ("correlation_id", "correlationId"),
    ]),
    ("ActivityApi", "CUpti_ActivityAPI", [
        ("cbid", "cbid"), ("start", "start"), ("end", "end"), ("thread_id", "threadId"),
        ("correlation_id", "correlationId"),
    ]),
    ("ActivityMarker", "CUpti_ActivityMarker2", [
        ("flags", "flags"), ("timestamp", "timestamp"), ("id", "id"),
        ("object_kind", "objectKind"), ("object_id", "objectId"), ("name", "name"),
        ("domain", "domain"),
    ]),
    ("ActivityOverhead", "CUpti_ActivityOverhead3", [
        ("overhead_kind", "overheadKind"), ("object_kind", "objectKind"),
        ("object_id", "objectId"), ("start", "start"), ("end", "end"),
    ]),
]  # fmt: skip

ENUMS = [
    ("kActMemcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
    ("kActMemset", "CUPTI_ACTIVITY_KIND_MEMSET"),
    ("kActKernel", "CUPTI_ACTIVITY_KIND_KERNEL"),
    ("kActDriver", "CUPTI_ACTIVITY_KIND_DRIVER"),
    ("kActRuntime", "CUPTI_ACTIVITY_KIND_RUNTIME"),
    ("kActConcurrentKernel", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"),
    ("kActMarker", "CUPTI_ACTIVITY_KIND_MARKER"),
    ("kActOverhead", "CUPTI_ACTIVITY_KIND_OVERHEAD"),
    ("kActMemcpy2", "CUPTI_ACTIVITY_KIND_MEMCPY2"),
    ("kActSynchronization", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
    ("kActExternalCorrelation", "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION"),
    ("kExtCustom0", "CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0"),
    ("kExtCustom1", "CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1"),
    ("kSyncEvent", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE"),
    ("kSyncStreamWaitEvent", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT"),
    ("kSyncStream", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE"),
    ("kSyncContext", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE"),
    ("kMarkerInstantaneous", "CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS"),
    ("kMarkerStart", "CUPTI_ACTIVITY_FLAG_MARKER_START"),
    ("kMarkerEnd", "CUPTI_ACTIVITY_FLAG_MARKER_END"),
    ("kFlushForced", "CUPTI_ACTIVITY_FLAG_FLUSH_FORCED"),
    ("kAttrDeviceBufferSize", "CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE"),
    ("kAttrDeviceBufferPoolLimit", "CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT"),
    ("kObjectThread", "CUPTI_ACTIVITY_OBJECT_THREAD"),
    ("kErrMaxLimitReached", "CUPTI_ERROR_MAX_LIMIT_REACHED"),
    ("kErrInvalidKind", "CUPTI_ERROR_INVALID_KIND"),
    ("kErrMultipleSubscribers", "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"),
    ("kErrQueueEmpty", "CUPTI_ERROR_QUEUE_EMPTY"),
    ("kErrUnknown", "CUPTI_ERROR_UNKNOWN"),
]


def cuda_include() -> Path:
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cupti_activity.h").exists():
            return Path(root) / "include"
    pytest.skip("no CUDA toolkit headers (cupti_activity.h) to check the declarations against")


def test_declarations_match_nvidia_headers(tmp_path: Path) -> None:
    inc = cuda_include()
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    checks = []
    for ours, theirs, fields in RECORDS:
        checks.append(f'CHECK("{ours} size", sizeof(sc::{ours}), sizeof({theirs}));')
        for a, b in fields:
            checks.append(
                f'CHECK("{ours}.{a}", offsetof(sc::{ours}, {a}), offsetof({theirs}, {b}));'
            )
    for ours, theirs in ENUMS:
        checks.append(f'CHECK("{ours}", (long)sc::{ours}, (long){theirs});')
    src = tmp_path / "check.cc"
    src.write_text(
        "#include <cstddef>\n#include <cstdio>\n#include <cupti.h>\n"
        '#include "cupti/cupti_abi.h"\n'
        "namespace sc = stallscope::cupti;\nint bad = 0;\n"
        "#define CHECK(what, a, b) if ((long)(a) != (long)(b)) "
        '{ std::printf("%s: ours %ld, NVIDIA %ld\\n", what, (long)(a), (long)(b)); ++bad; }\n'
        "int main() {\n" + "\n".join(checks) + "\nreturn bad;\n}\n"
    )
    exe = tmp_path / "check"
    subprocess.run(
        [cxx, "-std=c++20", f"-I{inc}", f"-I{ROOT / 'csrc'}", str(src), "-o", str(exe)],
        check=True,
        capture_output=True,
        text=True,
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
