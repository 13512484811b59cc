#!/usr/bin/env bash
# The C++ unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer, and with
# --python the Python tests of the capture core and the Kineto reader against an extension whose
# libraries are built the same way (its pybind11 glue is not instrumented: see CMakeLists.txt).
#
#   bash tests/cpp/run_sanitizers.sh [--python] [BUILD_DIR] [-- PYTEST_ARGS...]
#
# BUILD_DIR: build/cpp-sanitize by default. PYTEST_ARGS go to pytest after the test folders
# (CI leaves out the two 10 k-example fuzz tests: -k "not 10k").
#
# The Python run preloads the sanitizer runtime the extension was linked with (LD_PRELOAD: it
# must come before every other library of the process) and the C++ runtime beside it (the
# interpreter does not link libstdc++: loaded only with the extension, after the sanitizer's
# start, its __cxa_throw is not found and the first C++ exception stops the process with
# "CHECK failed: ... real___cxa_throw"), with leak detection off (the interpreter keeps memory
# to its exit on purpose); it imports stallscope from a copy of the package beside the build
# (BUILD_DIR/pkg) holding the instrumented _core. Any report fails the run
# (-fno-sanitize-recover=all: the process stops at the first).
set -euo pipefail
cd "$(dirname "$0")/../.."

python=0
build=build/cpp-sanitize
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=1 ;;
    --) shift; break ;;
    -*) echo "run_sanitizers.sh: unknown option $1 (use --python, or -- before pytest's)" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done

args=(-S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTALLSCOPE_TESTS=ON
      -DSTALLSCOPE_SANITIZE=address,undefined)
if command -v ninja >/dev/null 2>&1; then args+=(-G Ninja); fi
if [ "$python" = 1 ]; then
  # pybind11's CMake package, the extension's build requirement, installed beside the build
  # (the environment is left as it is).
  if [ ! -d "$build/pybind11/pybind11" ]; then
    python3 -m pip install -q --target "$build/pybind11" "pybind11>=2.13"
  fi
  args+=(-DSTALLSCOPE_MODULE=ON "-DPython_EXECUTABLE=$(command -v python3)"
         "-Dpybind11_DIR=$PWD/$build/pybind11/pybind11/share/cmake/pybind11")
else
  args+=(-DSTALLSCOPE_MODULE=OFF)
fi
cmake "${args[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:strict_init_order=1 \
  ctest --test-dir "$build" --output-on-failure

[ "$python" = 1 ] || exit 0

core=$(ls "$build"/_core*.so)
asan=$(ldd "$core" | awk '/libasan/ {print $3}')
cxx=$(ldd "$core" | awk '/libstdc\+\+/ {print $3}')
if [ -z "$asan" ] || [ -z "$cxx" ]; then
  echo "run_sanitizers.sh: $core is not linked with libasan and libstdc++" >&2
  exit 1
fi
pkg=$build/pkg
rm -rf "$pkg"
mkdir -p "$pkg"
cp -r python/stallscope "$pkg/"
find "$pkg/stallscope" -name '*.so' -delete
cp "$core" "$build"/libnccl-profiler-stallscope.so "$pkg/stallscope/"
# An editable install redirects "import stallscope" to the source tree: dropped here, so that the
# copy above (first on PYTHONPATH) is the one imported, in subprocesses too.
cat >"$pkg/sitecustomize.py" <<'PY'
import sys

sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "ScikitBuildRedirectingFinder"]
PY
export PYTHONPATH=$PWD/$pkg${PYTHONPATH:+:$PYTHONPATH}
export LD_PRELOAD="$asan $cxx"
export ASAN_OPTIONS=detect_leaks=0
python3 -c "import stallscope._core as c, sys; sys.exit(0 if c.__file__.startswith('$PWD/$pkg/') else 'stallscope._core came from ' + c.__file__)"
python3 -m pytest -q -x -p no:cacheprovider tests/unit/core tests/unit/kineto "$@"
