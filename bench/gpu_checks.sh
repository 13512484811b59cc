#!/usr/bin/env bash
# Every GPU check of the project in one go, on a GPU machine that reaches no package index:
# install the carried wheels (.whl/, see bench/README.md "All GPU checks in one go") and build
# stallscope into /tmp/site, then measure the device model (gpu_device_model.py,
# gpu_sustained.py, gpu_step_check.py; the memory model: loss_memory.py and
# activation_memory.py), the overhead of tracing a training step (gpu_overhead.py), and run
# the CUPTI validation, the NCCL plugin check and the NCCL comm benchmark, each under its own
# time limit so that one failure leaves the others their time. Logs and results are packed
# after each step into $OUT/gpu_checks.tgz (default OUT: /tmp/stallscope-gpu-checks-out,
# outside the checkout; one file, easy to copy back from a machine with no network); the
# results also stay in bench/results/.
#
#     bash bench/gpu_checks.sh            # OUT=/some/folder bash bench/gpu_checks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/stallscope-gpu-checks-out}"
LOG=$(mktemp -d /tmp/stallscope-gpu-checks.XXXXXX)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
PY="${PYTHON:-python3}"
t0=$(date +%s)
stamp() { echo "== [$(($(date +%s) - t0)) s] $*" | tee -a "$LOG/status.txt"; }
pack() {  # the logs and every result so far, in one file under $OUT
  cp bench/results/gpu_* bench/results/kineto_rank_folders.json "$LOG"/ 2>/dev/null
  cp -r python/stallscope/predict/data/efficiency "$LOG"/ 2>/dev/null
  tar czf "$OUT/gpu_checks.tgz" -C "$LOG" .
}

stamp "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PY" -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.nccl.version() if torch.cuda.is_available() else None)"
  nproc
} 2>&1 | tee "$LOG/machine.txt"

stamp "install: carried wheels + stallscope (build)"
export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --no-build-isolation \
  --upgrade --target /tmp/site .whl/*.whl . >"$LOG/install.log" 2>&1; then
  tail -40 "$LOG/install.log"
  stamp "install failed"
  pack
  exit 1
fi
export PYTHONPATH=/tmp/site
"$PY" -c "import polars as pl, stallscope; pl.Config.set_fmt_str_lengths(200); print(stallscope.backends())" \
  2>&1 | tee "$LOG/backends.txt"
pack

run() {  # run NAME LIMIT_S CMD...: one check, its log in $LOG/NAME.log, its exit status noted
  local name=$1 limit=$2
  shift 2
  stamp "$name (limit ${limit} s)"
  timeout -k 10 "$limit" "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  tail -25 "$LOG/$name.log"
  stamp "$name rc=$rc"
  pack
}

# The device model's ground truth first (GEMM / attention efficiency, per-layer times), then the
# overhead of tracing a real training step (every mode, continuous with device windows included:
# gpu_overhead.py's continuous_duty), then the capture checks. Each has its own limit; the
# defaults fit one 10-minute call on an H100 or H200 (set a limit to 0 to skip that step).
step() {  # step NAME LIMIT CMD...: run unless LIMIT is 0
  if [ "$2" = 0 ]; then stamp "$1 skipped"; return; fi
  run "$@"
}
step device_model "${DEVICE_MODEL_LIMIT:-170}" "$PY" bench/gpu_device_model.py \
  --budget-s "${DEVICE_MODEL_BUDGET:-120}"
# The clock a long run sustains: GEMMs after an idle and after a minute of training steps, with
# NVML clocks and power beside them (the table's "sustained" entry).
step sustained "${SUSTAINED_LIMIT:-120}" "$PY" bench/gpu_sustained.py \
  --heat-s "${SUSTAINED_HEAT_S:-60}"
# A whole training step (4 Llama 3.1 8B layers, 8k tokens) against the planner's prediction of
# it: the kernel classes, the idle time and the anchoring compute factor.
step step_check "${STEP_CHECK_LIMIT:-90}" "$PY" bench/gpu_step_check.py
# The memory model's two CPU measurements again on the GPU's caching allocator: what a loss and
# a Llama block keep for the backward, and the peak the allocator reserved over what it held.
step loss_memory "${LOSS_MEMORY_LIMIT:-60}" "$PY" bench/loss_memory.py --device cuda
step activation_memory "${ACTIVATION_MEMORY_LIMIT:-180}" "$PY" bench/activation_memory.py \
  --device cuda
if [ -f bench/gpu_overhead.py ]; then
  step overhead "${OVERHEAD_LIMIT:-200}" "$PY" bench/gpu_overhead.py ${OVERHEAD_ARGS:---quick}
fi
step cupti_validation "${CUPTI_LIMIT:-90}" "$PY" bench/gpu_cupti_validation.py \
  --steps "${CUPTI_STEPS:-20}" --warmup 5 --reps "${CUPTI_REPS:-2}"
step nccl_plugin "${NCCL_PLUGIN_LIMIT:-50}" "$PY" bench/gpu_nccl_plugin.py --iters 10
step comm_nccl "${COMM_LIMIT:-45}" "$PY" bench/gpu_comm_nccl.py --max-bytes 64M --iters 10
# Not a GPU check: a GPU machine's many cores for the side-by-side read of rank folders. Its
# base trace, when carried in .kineto/ (the V100 one; else the repository's small H200 trace).
BASE=$(ls .kineto/*.json.gz 2>/dev/null | head -1)
step rank_folders "${RANK_FOLDERS_LIMIT:-0}" "$PY" bench/kineto_rank_folders.py --rounds 3 \
  ${BASE:+--base "$BASE"}

stamp "done"
pack
ls -la "$LOG"
