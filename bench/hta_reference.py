"""Ground truth for the HTA-identical views: run HolisticTraceAnalysis 0.5.0 on every trace set of
tests/data/kineto/ and write its numbers as small JSON fixtures
(tests/data/hta_reference/).

HTA is never a stallscope dependency: run this with the interpreter of a separate venv, e.g.

    python3 -m venv /work/venvs/hta
    /work/venvs/hta/bin/pip install holistictraceanalysis==0.5.0 'pandas<3'
    /work/venvs/hta/bin/python bench/hta_reference.py [DATA_DIR] [OUT_DIR]

Times are HTA's: trace units (µs), after its ns rounding of float timestamps.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _clean(v: object) -> object:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return _clean(v.item())  # numpy scalar
    return v


def _records(df) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    return [{str(k): _clean(v) for k, v in row.items()} for row in df.to_dict("records")]


def reference(trace_dir: Path) -> dict[str, object]:
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_dir=str(trace_dir))
    ranks = sorted(ta.t.get_ranks())
    out: dict[str, object] = {"hta_version": "0.5.0", "trace": trace_dir.name, "ranks": ranks}
    out["temporal_breakdown"] = _records(ta.get_temporal_breakdown(visualize=False))
    out["comm_comp_overlap"] = _records(ta.get_comm_comp_overlap(visualize=False))
    types, kernels = ta.get_gpu_kernel_breakdown(visualize=False)
    out["kernel_type_breakdown"] = _records(types)
    out["kernel_breakdown"] = _records(kernels)
    idle, _ = ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
    out["idle_time_breakdown"] = _records(idle)
    launch = ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    out["launch_stats"] = {
        str(r): {
            "count": len(df),
            "cpu_duration_sum": _clean(df["cpu_duration"].sum()),
            "gpu_duration_sum": _clean(df["gpu_duration"].sum()),
            "launch_delay_sum": _clean(df["launch_delay"].sum()),
            "launch_delay_max": _clean(df["launch_delay"].max()) if len(df) else None,
            "gpu_shorter_than_cpu": int((df["gpu_duration"] < df["cpu_duration"]).sum()),
            "cpu_over_50us": int((df["cpu_duration"] > 50).sum()),
            "launch_delay_over_100us": int((df["launch_delay"] > 100).sum()),
        }
        for r, df in launch.items()
    }
    summary = ta.get_queue_length_summary(ranks=ranks)
    if summary is not None:
        summary = summary.copy()
        summary.columns = [c[1] for c in summary.columns]
        out["queue_length"] = _records(summary.reset_index())
    else:
        out["queue_length"] = []
    return out


def main() -> None:
    logging.disable(logging.WARNING)
    # The repository's trace sets (tests/data/kineto), or the folder given.
    datas = [Path(sys.argv[1])] if len(sys.argv) > 1 else [ROOT / "tests" / "data" / "kineto"]
    dest = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests" / "data" / "hta_reference"
    dest.mkdir(parents=True, exist_ok=True)
    sets = [p for data in datas if data.is_dir() for p in data.iterdir() if p.is_dir()]
    for trace_dir in sorted(sets):
        ref = reference(trace_dir)
        (dest / f"{trace_dir.name}.json").write_text(
            json.dumps(ref, indent=1, sort_keys=True) + "\n"
        )
        print(f"{trace_dir.name}: written", file=sys.stderr)


if __name__ == "__main__":
    main()
